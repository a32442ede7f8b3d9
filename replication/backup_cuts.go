package replication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/catchup"
)

// A data group's cut for a backup taken on another node
// (docs/operations.md, "Backup and restore"; backup_groups.go takes the
// backup). The node that writes a backup needs each data group's cut
// before it writes a byte, since the file's header gives its size: the
// group's leader, asked over the Raft port (callCutOpen), takes the cut
// (catchup.TakeCut: its snapshot and every segment it lists, opened) and
// holds it, answering its description and an id; the backup's node then
// reads the cut's body in chunks (callCutRead, each at the offset the
// last one ended) as it writes the group's part, and releases it
// (callCutClose). A cut nobody touched for cutIdle is released, so one
// whose backup's node went away does not hold its files for long; the
// backup's node touches the cuts it has not read yet while it writes
// the others (keepCuts).

// Calls of cuts (groupCall.Cut).
const (
	// callReadIndex asks a group's leader for its applied index once it
	// confirmed its leadership: every write the group acknowledged is at
	// or below it (the answer's Result, JSON).
	callReadIndex = "read-index"
	// callCutOpen asks a group's leader for a cut of the group, taken
	// once it confirmed its leadership (cutOpened in the Result).
	callCutOpen = "cut-open"
	// callCutRead reads the next bytes of a held cut's body (cutChunk),
	// or only touches it.
	callCutRead = "cut-read"
	// callCutClose releases a held cut.
	callCutClose = "cut-close"
)

const (
	// cutIdle is how long a held cut stays without a read or a touch.
	cutIdle = 2 * time.Minute
	// cutChunkBytes bounds the bytes one callCutRead answers.
	cutChunkBytes = 4 << 20
)

// cutCall names a held cut and what is read of it.
type cutCall struct {
	ID string `json:"id"`
	// Offset is where the read starts in the cut's body: where the last
	// one ended.
	Offset int64 `json:"offset"`
	// Max bounds the bytes answered (at most cutChunkBytes).
	Max int `json:"max"`
	// Touch only keeps the cut held.
	Touch bool `json:"touch,omitempty"`
}

// cutOpened answers callCutOpen.
type cutOpened struct {
	ID   string          `json:"id"`
	Info catchup.CutInfo `json:"info"`
}

// cutChunk answers callCutRead: the next bytes of the body, and whether
// they end it.
type cutChunk struct {
	Data []byte `json:"data"`
	EOF  bool   `json:"eof,omitempty"`
}

// heldCuts are the cuts this node holds for other nodes' backups.
type heldCuts struct {
	mu sync.Mutex
	// seq numbers the cuts; cuts holds them by id; closed is set once
	// the node closes (guarded by mu).
	seq    uint64
	cuts   map[string]*heldCut
	closed bool
}

// heldCut is one held cut.
type heldCut struct {
	// mu orders the reads of the cut and its release.
	mu    sync.Mutex
	cut   *catchup.Cut
	off   int64
	eof   bool
	timer *time.Timer
}

// hold keeps c until released, or idle for cutIdle, and returns its id.
func (h *heldCuts) hold(c *catchup.Cut) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		c.Close()
		return "", backend.ErrShutdown
	}
	if h.cuts == nil {
		h.cuts = map[string]*heldCut{}
	}
	h.seq++
	id := strconv.FormatUint(h.seq, 10) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	hc := &heldCut{cut: c}
	hc.timer = time.AfterFunc(cutIdle, func() { h.release(id) })
	h.cuts[id] = hc
	return id, nil
}

// get returns the held cut id, its idle time started again.
func (h *heldCuts) get(id string) (*heldCut, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hc := h.cuts[id]
	if hc == nil {
		return nil, fmt.Errorf("%w: no cut %q is held here (released, or idle for %s)", backend.ErrInvalidArgument, id, cutIdle)
	}
	hc.timer.Reset(cutIdle)
	return hc, nil
}

// read reads up to limit bytes of cut id's body at off, which must be
// where the last read ended.
func (h *heldCuts) read(id string, off int64, limit int) (cutChunk, error) {
	hc, err := h.get(id)
	if err != nil {
		return cutChunk{}, err
	}
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if off != hc.off {
		return cutChunk{}, fmt.Errorf("%w: cut %s read at %d, its body is at %d", backend.ErrInvalidArgument, id, off, hc.off)
	}
	buf := make([]byte, max(0, min(limit, cutChunkBytes)))
	n := 0
	for n < len(buf) && !hc.eof {
		k, err := hc.cut.Read(buf[n:])
		n += k
		if err == io.EOF {
			hc.eof = true
		} else if err != nil {
			return cutChunk{}, fmt.Errorf("cut %s at %d: %w", id, hc.off+int64(n), err)
		}
	}
	hc.off += int64(n)
	return cutChunk{Data: buf[:n], EOF: hc.eof}, nil
}

// release closes cut id and forgets it; an id not held is no error.
func (h *heldCuts) release(id string) {
	h.mu.Lock()
	hc := h.cuts[id]
	delete(h.cuts, id)
	h.mu.Unlock()
	if hc != nil {
		hc.close()
	}
}

func (hc *heldCut) close() {
	hc.timer.Stop()
	hc.mu.Lock()
	defer hc.mu.Unlock()
	hc.cut.Close()
}

// closeAll releases every cut, and every cut held after.
func (h *heldCuts) closeAll() {
	h.mu.Lock()
	cuts := h.cuts
	h.cuts, h.closed = nil, true
	h.mu.Unlock()
	for _, hc := range cuts {
		hc.close()
	}
}

// isCutCall reports whether kind is a call of this file.
func isCutCall(kind string) bool {
	switch kind {
	case callReadIndex, callCutOpen, callCutRead, callCutClose:
		return true
	}
	return false
}

// answerCutCall answers a call of cuts for group g, of which dg is this
// node's replica (nil: none), from node peer.
func (n *Node) answerCutCall(ctx context.Context, peer string, g uint64, dg *dataGroup, call groupCall) groupAnswer {
	var (
		res any
		err error
	)
	switch {
	case call.Kind == callReadIndex || call.Kind == callCutOpen:
		if dg == nil || dg.raft.State() != raft.Leader || !n.data.servesNow(dg) || !dg.confirmLeader() {
			var leader string
			if dg != nil {
				_, id := dg.raft.LeaderWithID()
				leader = string(id)
			}
			return groupAnswer{Err: encodeWireError(fmt.Errorf("%w: data group %d", backend.ErrNotLeader, g)), Leader: leader}
		}
		if call.Kind == callReadIndex {
			res = dg.fsm.AppliedIndex()
			break
		}
		var c *catchup.Cut
		if c, err = n.groupCutHere(ctx, dg, dg.fsm.AppliedIndex()); err != nil {
			break
		}
		var id string
		if id, err = n.cuts.hold(c); err == nil {
			res = cutOpened{ID: id, Info: c.Info}
		}
	case call.Cut == nil:
		err = fmt.Errorf("%w: a %s call names no cut", backend.ErrInvalidArgument, call.Kind)
	case call.Kind == callCutClose:
		n.cuts.release(call.Cut.ID)
	case call.Cut.Touch:
		_, err = n.cuts.get(call.Cut.ID)
	default:
		// Charged to the answer budget until written (remote_answers.go).
		if _, err = n.chargeRemoteAnswer(ctx, peer, min(call.Cut.Max, cutChunkBytes)); err == nil {
			res, err = n.cuts.read(call.Cut.ID, call.Cut.Offset, call.Cut.Max)
		}
	}
	var ans groupAnswer
	if err == nil && res != nil {
		ans.Result, err = json.Marshal(res)
	}
	if err != nil {
		return groupAnswer{Err: encodeWireError(err)}
	}
	return ans
}

// groupCutHere takes a cut of this node's replica dg at index from or
// later.
func (n *Node) groupCutHere(ctx context.Context, dg *dataGroup, from uint64) (*catchup.Cut, error) {
	return catchup.TakeCut(ctx, catchup.BackupSource{Snapshots: raftSnapshots{r: dg.raft, snaps: dg.stores.snaps, applied: dg.fsm.AppliedIndex},
		Segments: dg.fsm, Group: dg.id, MinIndex: from, NodeID: n.cfg.NodeID, Logger: n.cfg.Logger.With("group", dg.id)})
}

// remoteCut is the body of a cut another node holds, read in chunks.
type remoteCut struct {
	n   *Node
	ctx context.Context
	g   uint64
	// node holds the cut, id names it there.
	node, id string
	off      int64
	buf      []byte
	eof      bool
}

// remoteCutRetries bounds the reads of one chunk that the holder refuses
// for want of room in its answer budget.
const remoteCutRetries = 20

func (r *remoteCut) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.eof {
			return 0, io.EOF
		}
		var chunk cutChunk
		var err error
		for attempt := range remoteCutRetries {
			if chunk, err = r.call(callCutRead, cutCall{ID: r.id, Offset: r.off, Max: cutChunkBytes}); !errors.Is(err, backend.ErrOverloaded) {
				break
			}
			select {
			case <-r.ctx.Done():
				return 0, r.ctx.Err()
			case <-time.After(time.Duration(attempt+1) * 50 * time.Millisecond):
			}
		}
		if err != nil {
			return 0, err
		}
		if len(chunk.Data) == 0 && !chunk.EOF {
			return 0, fmt.Errorf("data group %d's cut at %s: an empty chunk at %d", r.g, r.node, r.off)
		}
		r.buf, r.eof = chunk.Data, chunk.EOF
		r.off += int64(len(chunk.Data))
	}
	k := copy(p, r.buf)
	r.buf = r.buf[k:]
	return k, nil
}

// call sends a call of kind about the cut to its holder.
func (r *remoteCut) call(kind string, c cutCall) (cutChunk, error) {
	return callCut(r.ctx, r.n, r.node, r.g, kind, c)
}

func callCut(ctx context.Context, n *Node, node string, g uint64, kind string, c cutCall) (cutChunk, error) {
	ans, err := n.callGroup(ctx, node, g, groupCall{Kind: kind, Cut: &c})
	if err != nil {
		return cutChunk{}, fmt.Errorf("data group %d's cut at %s: %w", g, node, err)
	}
	if ans.Err != nil {
		return cutChunk{}, fmt.Errorf("data group %d's cut at %s: %w", g, node, ans.Err.decode())
	}
	var chunk cutChunk
	if len(ans.Result) > 0 {
		if err := json.Unmarshal(ans.Result, &chunk); err != nil {
			return cutChunk{}, fmt.Errorf("data group %d's cut at %s: %w", g, node, err)
		}
	}
	return chunk, nil
}

// touch keeps the cut held.
func (r *remoteCut) touch(ctx context.Context) error {
	_, err := callCut(ctx, r.n, r.node, r.g, callCutRead, cutCall{ID: r.id, Touch: true})
	return err
}

// release releases the cut at its holder, whatever became of the
// backup's context.
func (r *remoteCut) release() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := callCut(ctx, r.n, r.node, r.g, callCutClose, cutCall{ID: r.id})
	return err
}
