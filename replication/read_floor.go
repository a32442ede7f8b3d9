package replication

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/logd-dev/logd/backend"
)

// Reads through one node never go back (docs/architecture.md, "Read
// guarantees"). With one group that holds because a node reads its own
// replica, whose applied state only grows. A partition of a data group
// is read from this node's replica of the group once it caught up, or
// else from any replica of the group: two of those can stand at different
// points, and so can this node's replica and a replica it read from a
// moment before. readFloors keeps, per partition of a placed topic, the
// highest end a read through this node answered; a read that would answer
// below it waits a little for this node's replica, asks another replica,
// and otherwise fails with *backend.BehindError (the client tries again,
// or at the leader), never answering older than before.

// floorWait bounds how long a read waits for this node's replica to
// reach the floor before it asks the other replicas.
const floorWait = 500 * time.Millisecond

// readFloors is the highest end answered per placed partition.
type readFloors struct {
	mu sync.Mutex
	m  map[floorKey]floorEnd
}

type floorKey struct {
	topic     string
	partition int32
}

// floorEnd is a partition's floor, for one incarnation of its topic (a
// topic deleted and created again starts from 0).
type floorEnd struct {
	incarnation uint64
	end         int64
}

// get returns the floor of a partition of the topic's incarnation.
func (f *readFloors) get(topic string, p int32, incarnation uint64) int64 {
	end, _ := f.lookup(topic, p, incarnation)
	return end
}

// lookup returns the floor of a partition of the topic's incarnation, and
// whether this process answered a read of it or saw a write to it at all
// (false: the floor is 0 for want of memory, as after a restart, not
// because it answered an empty partition).
func (f *readFloors) lookup(topic string, p int32, incarnation uint64) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.m[floorKey{topic, p}]; ok && e.incarnation == incarnation {
		return e.end, true
	}
	return 0, false
}

// raise records that a read answered end.
func (f *readFloors) raise(topic string, p int32, incarnation uint64, end int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[floorKey]floorEnd{}
	}
	k := floorKey{topic, p}
	if e, ok := f.m[k]; !ok || e.incarnation != incarnation || e.end < end {
		f.m[k] = floorEnd{incarnation: incarnation, end: end}
	}
}

// NoteWritten is backend.API.NoteWritten: a write this node forwarded, or
// served, reached ends in partitions of the placed topic's incarnation;
// reads through this node that start after it see it (read your writes,
// docs/architecture.md "Read guarantees"), though this node's replica of
// the partition's group, if any, may not have applied it yet. Writes to
// the meta group's partitions are covered by the server's floor of the
// meta group's index (server/read_your_writes.go).
func (b *Backend) NoteWritten(topic string, incarnation uint64, ends map[int32]int64) {
	for p, end := range ends {
		b.floors.raise(topic, p, incarnation, end)
	}
}

// groupFloors is, per data group, the highest index its leader had
// applied when it acknowledged a write this node routed or forwarded.
// A replica read here (this node's, or another node's asked over the
// Raft port) that has not applied it would miss the write: reads of the
// group's state that a write changes without moving a partition's end
// (a queue group's leases, acks and dead letters) wait for it
// (docs/architecture.md, "Read guarantees").
type groupFloors struct {
	mu sync.Mutex
	m  map[uint64]uint64
}

// get returns group g's floor (0: none).
func (f *groupFloors) get(g uint64) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[g]
}

// raise makes group g's floor at least applied.
func (f *groupFloors) raise(g, applied uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[uint64]uint64{}
	}
	f.m[g] = max(f.m[g], applied)
}

// NoteGroupsApplied is backend.API.NoteGroupsApplied.
func (b *Backend) NoteGroupsApplied(groups map[uint64]uint64) {
	for g, applied := range groups {
		b.groupFloors.raise(g, applied)
	}
}

// noteGroupWrite records that data group g's leader acknowledged a write
// of this node's at index applied: in the node's floor, and for the
// call's forwarding node (backend.GroupsWritten).
func (n *Node) noteGroupWrite(ctx context.Context, g, applied uint64) {
	if g == 0 || applied == 0 {
		return
	}
	n.groupFloors.raise(g, applied)
	backend.NoteGroupWritten(ctx, g, applied)
}

// atGroupFloor reports whether dg's replica applied group's floor here,
// waiting up to floorWait for it (or while ctx lasts).
func (n *Node) atGroupFloor(ctx context.Context, dg *dataGroup) bool {
	floor := n.groupFloors.get(dg.id)
	if floor == 0 || dg.fsm.AppliedIndex() >= floor {
		return true
	}
	dg.awaitApplied(ctx, floor, floorWait)
	return dg.fsm.AppliedIndex() >= floor
}

// readPlaced is Backend.Read of a partition of a placed topic (a topic
// whose CreateIndex is incarnation) that never answers below the floor:
// local reads this node's replica (nil when it holds none that caught
// up), remote any replica of group g that answers at or above the floor,
// or, with leader, only the group's leader. The floors are in memory: a
// node that restarted does not know what it answered before, and a
// replica of the group may trail that; so the first remote read of a
// partition since this process started, which sets its floor, goes to
// the group's leader, which holds every committed write (unless the
// topic was created after the start). (This node's
// own replica, once it caught up, applied the commit index its leader
// told it after the start, past anything answered before.)
func (b *Backend) readPlaced(topic string, p int32, incarnation uint64, g uint64, local func() (backend.ReadResult, error), remote func(ctx context.Context, floor int64, leader bool) (backend.ReadResult, error)) (backend.ReadResult, error) {
	floor, known := b.floors.lookup(topic, p, incarnation)
	// A topic created after this process started was never read by an
	// earlier one: its floor of 0 is known.
	known = known || incarnation > b.startIndex
	if local != nil {
		deadline := time.Now().Add(floorWait)
		for {
			res, err := local()
			end, known := answeredEnd(res, err)
			if !known || end >= floor {
				if known {
					b.floors.raise(topic, p, incarnation, end)
				}
				return res, err
			}
			if !time.Now().Before(deadline) {
				break
			}
			t := time.NewTimer(min(time.Until(deadline), remotePoll))
			select {
			case <-res.Changed:
			case <-t.C:
			}
			t.Stop()
		}
	}
	if remote == nil || b.stores.port == nil {
		return backend.ReadResult{}, b.behindFloor(topic, p, floor)
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ApplyTimeout)
	defer cancel()
	res, err := remote(ctx, floor, !known)
	if end, known := answeredEnd(res, err); known {
		b.floors.raise(topic, p, incarnation, end)
	}
	return res, err
}

// answeredEnd is the end of the partition a read's answer shows: its
// result's, or an out-of-range error's; false for any other error.
func answeredEnd(res backend.ReadResult, err error) (int64, bool) {
	var oor *backend.OutOfRangeError
	switch {
	case err == nil:
		return res.EndOffset, true
	case errors.As(err, &oor):
		return oor.End, true
	}
	return 0, false
}

// behindFloor is the error of a read no replica could answer at or above
// the floor.
func (b *Backend) behindFloor(topic string, p int32, floor int64) error {
	addr, _ := b.LeaderAPIAddress()
	return &backend.BehindError{What: fmt.Sprintf("%s-%d up to %d, which this node answered before (no replica it reads has applied it yet)", topic, p, floor), LeaderAddress: addr}
}
