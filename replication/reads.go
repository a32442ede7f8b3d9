package replication

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/replication/fsm"
)

// Read returns whole stored batches of a partition from offset, up to
// maxBytes in total but always at least one batch (so a batch larger than
// maxBytes is still served), without re-encoding anything.
//
// An offset outside [LogStartOffset, EndOffset] is an *OutOfRangeError
// (matching ErrOffsetOutOfRange) carrying the bounds; at EndOffset Batches
// is empty. Stored bytes that fail their checks are ErrCorrupt: the
// damaged range is never served.
func (b *Backend) Read(topic string, partition int32, offset int64, maxBytes int) (backend.ReadResult, error) {
	return b.ReadRecords(topic, partition, offset, maxBytes, 0)
}

// ReadRecords is backend.API.ReadRecords: Read bounded by a record count
// (log.Log.ReadRecords).
func (b *Backend) ReadRecords(topic string, partition int32, offset int64, maxBytes, maxRecords int) (backend.ReadResult, error) {
	f, err := b.partitionFSM(topic, partition)
	var pe *fsm.PartitionElsewhereError
	elsewhere := errors.As(err, &pe)
	if err != nil && !elsewhere {
		return backend.ReadResult{}, err
	}
	if f == b.fsm {
		return readBatches(nil, f, topic, partition, offset, maxBytes, maxRecords)
	}
	// A partition of a data group: from this node's replica when it
	// caught up, else from a replica of the group, never older than a
	// read through this node answered before (read_floor.go).
	t, err := b.fsm.Topic(topic)
	if err != nil {
		return backend.ReadResult{}, err
	}
	g := t.PartitionGroup(partition)
	// Taken before the read, so a topic this node's replica adopts in
	// between still wakes a long poll (notAdopted).
	var arrived <-chan struct{}
	if dg := b.dataGroup(g); dg != nil {
		arrived = dg.fsm.TopicArrived()
	}
	var local func() (backend.ReadResult, error)
	if !elsewhere {
		local = func() (backend.ReadResult, error) {
			return readBatches(b.fsm, f, topic, partition, offset, maxBytes, maxRecords)
		}
	}
	remote := func(ctx context.Context, floor int64, leader bool) (backend.ReadResult, error) {
		return b.readRemoteFrom(ctx, g, readCall{Topic: topic, Partition: partition, Offset: offset, MaxBytes: maxBytes, MaxRecords: maxRecords, Leader: leader}, floor)
	}
	res, err := b.readPlaced(topic, partition, t.CreateIndex, g, local, remote)
	if err != nil && errors.Is(err, backend.ErrUnknownTopic) {
		// This node's replica, or the replica asked, has not adopted it
		// yet: an empty partition, unless a read through this node
		// answered more before (never go back).
		if floor := b.floors.get(topic, partition, t.CreateIndex); floor > 0 {
			return backend.ReadResult{}, b.behindFloor(topic, partition, floor)
		}
		return b.notAdopted(topic, partition, offset, arrived)
	}
	return res, err
}

// notAdopted answers a read of a partition the meta group placed in a
// data group whose replica here has not adopted it yet (it was just
// created, or the replica lags): at offset 0, an empty partition whose
// Changed closes when this node's replica adopts a topic (arrived, nil
// without a replica here) or after remotePoll, whichever is first (a long
// poll then reads again); past it, *backend.BehindError, which sends the
// client to the leader.
func (b *Backend) notAdopted(topic string, partition int32, offset int64, arrived <-chan struct{}) (backend.ReadResult, error) {
	if offset > 0 {
		addr, _ := b.LeaderAPIAddress()
		return backend.ReadResult{}, &backend.BehindError{What: fmt.Sprintf("%s-%d, not adopted by this node's replica of its data group yet", topic, partition), LeaderAddress: addr}
	}
	changed := make(chan struct{})
	go func() {
		t := time.NewTimer(remotePoll)
		defer t.Stop()
		select {
		case <-arrived:
		case <-t.C:
		}
		close(changed)
	}()
	return backend.ReadResult{Changed: changed}, nil
}

// groupPartition is partition p of topic in f, a data group's state
// machine, when f holds the incarnation of the topic that meta, the
// node's meta group state machine, holds: backend.ErrUnknownTopic when f
// holds none or an earlier one (deleted and created again, and not
// dropped by the group yet), whose records are not the topic's. With
// meta nil or f itself (the meta group), f's partition.
func groupPartition(meta, f *fsm.FSM, topic string, p int32) (*fsm.Partition, error) {
	if meta != nil && meta != f {
		mt, err := meta.Topic(topic)
		if err != nil {
			return nil, err
		}
		gt, err := f.Topic(topic)
		if err != nil {
			return nil, err
		}
		if gt.CreateIndex != mt.CreateIndex {
			return nil, fmt.Errorf("%w: %q of index %d, the data group holds that of %d", backend.ErrUnknownTopic, topic, mt.CreateIndex, gt.CreateIndex)
		}
	}
	return f.Partition(topic, p)
}

// readBatches is Backend.ReadRecords on the state machine f, which holds
// the partition of meta's incarnation of the topic (groupPartition).
func readBatches(meta, f *fsm.FSM, topic string, partition int32, offset int64, maxBytes, maxRecords int) (backend.ReadResult, error) {
	p, err := groupPartition(meta, f, topic, partition)
	if err != nil {
		return backend.ReadResult{}, err
	}
	// Take the channel before reading, so an append in between wakes the
	// caller.
	changed := p.Changed()
	l := p.Log()
	data, start, end, err := l.ReadRecords(offset, maxBytes, maxRecords)
	if err != nil {
		return backend.ReadResult{}, fromStorage(err)
	}
	return backend.ReadResult{Batches: data, LogStartOffset: start, EndOffset: end, Changed: changed}, nil
}

// GroupLag computes a group's lag in a partition at a committed offset
// (the next offset to read, or -1 for none: then the oldest record is the
// first in the log), as of now.
func (b *Backend) GroupLag(topic string, partition int32, committed int64, now time.Time) (backend.Lag, error) {
	lag, err := b.groupLag(topic, partition, committed, now)
	return lag, fromStorage(err)
}

func (b *Backend) groupLag(topic string, partition int32, committed int64, now time.Time) (backend.Lag, error) {
	var lag backend.Lag
	var read func(offset int64) ([]byte, error)
	f, err := b.partitionFSM(topic, partition)
	var pe *fsm.PartitionElsewhereError
	switch {
	case errors.As(err, &pe) && b.stores.port != nil:
		// A partition of a data group this node holds no replica of: its
		// bounds and oldest record come from a replica of the group.
		o, err := b.Offsets(topic, partition)
		if err != nil {
			return backend.Lag{}, err
		}
		lag.Start, lag.End = o.LogStart, o.End
		read = func(offset int64) ([]byte, error) {
			res, err := b.Read(topic, partition, offset, 1)
			return res.Batches, err
		}
	case err != nil:
		return backend.Lag{}, err
	default:
		p, err := groupPartition(b.fsm, f, topic, partition)
		if err != nil {
			return backend.Lag{}, err
		}
		l := p.Log()
		lag.Start, lag.End = l.StartOffset(), l.EndOffset()
		read = func(offset int64) ([]byte, error) { return l.Read(offset, 1) }
	}
	lag.Records = group.LagRecords(committed, lag.Start, lag.End)
	if lag.Records == 0 {
		return lag, nil
	}
	from := max(committed, lag.Start)
	data, err := read(from)
	if err != nil || len(data) == 0 {
		return lag, nil
	}
	recs, err := batch.Records(data, from, 1)
	if err != nil || len(recs) == 0 {
		return lag, nil
	}
	if age := now.Sub(time.UnixMilli(recs[0].Timestamp)); age > 0 {
		lag.Seconds = age.Seconds()
	}
	return lag, nil
}
