package replication

import (
	"context"
	"fmt"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/cleaner"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/redrive"
)

// The leader's jobs live in packages of their own (replication/cleaner,
// replication/redrive), each seeing the node through the narrow
// interfaces it declares. jobNode implements them over the Node, with a
// produce path of its own; its reads, bounds and a redrive's ends go the
// front ends' way (a Backend over the same Node), so a topic placed over
// data groups is read from its groups. The Node starts the jobs' loops
// with itself and Close ends them.

// jobNode is the node as its leader jobs see it.
type jobNode struct {
	n *Node
	// prod is the jobs' produce path, with round-robin counters of its
	// own (produce.go).
	prod producer
}

var (
	_ cleaner.Node = (*jobNode)(nil)
	_ redrive.Node = (*jobNode)(nil)
)

// IsLeader reports whether the node is the Raft leader.
func (j *jobNode) IsLeader() bool { return j.n.IsLeader() }

// Leads reports whether the node leads with its barrier applied (Ready).
func (j *jobNode) Leads() bool { return j.n.IsLeader() && j.n.metaReady() }

// Read is Backend.Read.
func (j *jobNode) Read(topic string, partition int32, offset int64, maxBytes int) (backend.ReadResult, error) {
	return NewBackend(j.n).Read(topic, partition, offset, maxBytes)
}

// Offsets is Backend.OffsetsLeader.
func (j *jobNode) Offsets(ctx context.Context, topic string, partition int32) (backend.Offsets, error) {
	return NewBackend(j.n).OffsetsLeader(ctx, topic, partition)
}

// Produce is Backend.Produce.
func (j *jobNode) Produce(ctx context.Context, req backend.ProduceRequest) (backend.ProduceResult, error) {
	return j.prod.Produce(ctx, req)
}

// Propose proposes an encoded command.
func (j *jobNode) Propose(ctx context.Context, cmd []byte) error {
	_, err := j.n.propose(ctx, cmd)
	return err
}

// ProposeRedrive proposes a redrive command stamped with the node's clock.
func (j *jobNode) ProposeRedrive(ctx context.Context, c fsm.Redrive) (fsm.RedriveJob, error) {
	if c.Op == fsm.RedriveAdvance && len(c.Offsets) > 0 {
		// Dead-letter partitions of a data group: the advance carries
		// their ends (group_ends.go).
		ends, err := NewBackend(j.n).placedEnds(ctx, c.Offsets)
		if err != nil {
			return fsm.RedriveJob{}, err
		}
		c.Ends = ends
	}
	data, err := fsm.EncodeRedrive(j.n.cfg.Now().UnixNano(), c)
	if err != nil {
		return fsm.RedriveJob{}, err
	}
	res, err := j.n.propose(ctx, data)
	if err != nil {
		return fsm.RedriveJob{}, err
	}
	job, ok := res.(fsm.RedriveJob)
	if !ok {
		return fsm.RedriveJob{}, fmt.Errorf("redrive: unexpected result %T", res)
	}
	return job, nil
}

// startJobs builds the leader's jobs and starts their loops; they end
// when Close closes n.stop, and Close waits for them (cleanerDone,
// redriveDone).
func (n *Node) startJobs() {
	jn := &jobNode{n: n, prod: producer{n: n}}
	n.cleaner = cleaner.New(jn, n.fsm, cleaner.Options{Interval: n.cfg.CleanerInterval, IOBytesPerSec: n.cfg.CleanerIOBytesPerSec,
		Now: n.cfg.Now, Logger: n.cfg.Logger})
	n.redrive = redrive.New(jn, n.fsm, redrive.Options{Logger: n.cfg.Logger})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-n.stop
		cancel()
	}()
	n.cleanerDone, n.redriveDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(n.cleanerDone)
		n.cleaner.Run(ctx)
	}()
	go func() {
		defer close(n.redriveDone)
		n.redrive.Run(ctx)
	}()
}
