package replication

import (
	"context"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
)

// Coalesced appends (docs/architecture.md, "Coalesced appends"): the
// appends proposed to one Raft group while the group's previous entry is
// being handed to Raft wait in the group's coalescer, and the next entry
// carries all of them (fsm.CmdAppendMany), each answered with its own
// outcome. There is no linger: on an idle group an append is handed over
// at once; appends queue only while Raft is busy writing the entry before
// (on the leader, Raft's log write blocks the hand-off), so the busier
// the group, the more each entry carries. Raft entries, apply calls and
// their per-entry work fall with the number of small calls.
const (
	// coalesceMaxBytes bounds the appends carried by one entry; an append
	// larger than coalesceAloneBytes goes alone, as before.
	coalesceMaxBytes   = 1 << 20
	coalesceAloneBytes = 256 << 10
)

// coalescer queues one Raft group's appends for its submitting
// goroutine, which runs while the queue is not empty and ends when it is.
type coalescer struct {
	mu      sync.Mutex
	queue   []*queuedAppend
	running bool
}

// queuedAppend is an append waiting to be proposed: its unsealed encoded
// command, and where its outcome goes (buffered, so the submitter never
// blocks on a caller that gave up).
type queuedAppend struct {
	data []byte
	done chan appendOutcome
}

type appendOutcome struct {
	res any
	err error
}

// proposeAppend proposes the encoded append data (unsealed) to the group
// r runs, whose state machine is sm, through the group's coalescer c, and
// returns its result as proposeOn does. queued, if not nil, is called
// once every append proposed later will follow this one in the group's
// log: when it is in the coalescer's queue, or for an append that goes
// alone, once it is applied; never if it was refused first.
func (n *Node) proposeAppend(ctx context.Context, c *coalescer, r *raft.Raft, sm *fsm.FSM, data []byte, queued func()) (any, error) {
	if len(data) > coalesceAloneBytes {
		res, err := n.proposeOn(ctx, r, sm, data)
		if err == nil && queued != nil {
			queued()
		}
		return res, err
	}
	if err := n.mayPropose(r, sm, data); err != nil {
		return nil, err
	}
	q := &queuedAppend{data: data, done: make(chan appendOutcome, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, q)
	start := !c.running
	c.running = true
	c.mu.Unlock()
	if queued != nil {
		queued()
	}
	if start {
		n.applyWaiters.Add(1)
		go func() {
			defer n.applyWaiters.Add(-1)
			n.submitQueued(c, r)
		}()
	}
	select {
	case o := <-q.done:
		return o.res, o.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %v", backend.ErrTimeout, ctx.Err())
	}
}

// submitQueued hands c's queued appends to Raft, as many as fit in one
// entry at a time, until the queue is empty.
func (n *Node) submitQueued(c *coalescer, r *raft.Raft) {
	for {
		c.mu.Lock()
		take, size := 0, 0
		for take < len(c.queue) && take < fsm.MaxAppendMany && (take == 0 || size+len(c.queue[take].data) <= coalesceMaxBytes) {
			size += len(c.queue[take].data)
			take++
		}
		if take == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		batch := c.queue[:take:take]
		c.queue = c.queue[take:]
		if len(c.queue) == 0 {
			c.queue = nil
		}
		c.mu.Unlock()
		if len(batch) > 1 && !n.canCoalesce() {
			for _, q := range batch {
				n.submit([]*queuedAppend{q}, r)
			}
			continue
		}
		n.submit(batch, r)
	}
}

// canCoalesce says whether every member applies append-many entries. It
// asks for every entry of several appends (not remembered: a member of an
// earlier build may join), which the appends it carries share.
func (n *Node) canCoalesce() bool {
	level, err := n.featureLevel()
	return err == nil && level >= fsm.CoalesceLevel
}

// submit proposes batch as one entry (an append alone, or an
// append-many) and, once Raft answers, hands each append its outcome.
func (n *Node) submit(batch []*queuedAppend, r *raft.Raft) {
	var data []byte
	if len(batch) == 1 {
		data = batch[0].data
	} else {
		parts := make([][]byte, len(batch))
		for i, q := range batch {
			parts[i] = q.data
		}
		data = fsm.EncodeAppendMany(n.cfg.Now().UnixNano(), parts)
	}
	f := r.Apply(fsm.Seal(data), n.cfg.ApplyTimeout)
	n.applyWaiters.Add(1)
	go func() {
		defer n.applyWaiters.Add(-1)
		answer(batch, f)
	}()
}

// answer waits for f and hands each append of batch its outcome.
func answer(batch []*queuedAppend, f raft.ApplyFuture) {
	if err := f.Error(); err != nil {
		err = mapRaftError(err)
		for _, q := range batch {
			q.done <- appendOutcome{err: err}
		}
		return
	}
	if len(batch) == 1 {
		o := appendOutcome{res: f.Response()}
		if err, ok := o.res.(error); ok {
			o = appendOutcome{err: err}
		}
		batch[0].done <- o
		return
	}
	results, err := fsm.AppendManyResults(f.Response(), len(batch))
	for i, q := range batch {
		o := appendOutcome{err: err}
		if err == nil {
			o.res = results[i]
			if e, ok := o.res.(error); ok {
				o = appendOutcome{err: e}
			}
		}
		q.done <- o
	}
}
