package fsm

import (
	"fmt"
	"sort"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/queue"
	"github.com/logd-dev/logd/retention"
)

// Admission control. A topic with queue groups bounds each
// group's backlog (ready + in-flight + delayed records, and their bytes)
// with the topic settings queue.max.backlog.records and
// queue.max.backlog.bytes, and the age of its oldest unfinished record
// (from its append command's time to the append's) with
// queue.max.backlog.age.ms. An append that would take any group past a
// bound is refused whole, before anything is written, with an
// backend.OverloadedError; the client retries after the hint. The check reads only
// replicated state (queue groups and the state machine's end offsets), so
// every replica, and a replay, decides the same. Retention never deletes a
// record a group has not finished (ProtectedFrom), so these bounds are the
// only limit on a queue's backlog.

// overloaded makes the refusal of a bound, with the retry-after the excess
// over the bound needs at the drain rate.
func overloaded(topic, group, bound string, backlog, adding, limit int64, rate float64) *backend.OverloadedError {
	return &backend.OverloadedError{Topic: topic, Group: group, Bound: bound, Backlog: backlog, Adding: adding, Limit: limit,
		DrainPerSec: rate, RetryAfter: queue.RetryAfter(float64(backlog+adding-limit), rate)}
}

// protectedFrom is the lowest start offset of the topic's queue groups on a
// partition, retention.NoProtection without groups.
func (qs *queueGroups) protectedFrom(topic string, partition int32) int64 {
	qs.mu.RLock()
	defer qs.mu.RUnlock()
	from := int64(retention.NoProtection)
	for _, q := range qs.byTopic[topic] {
		if s, ok := q.PartitionStart(partition); ok {
			from = min(from, s)
		}
	}
	return from
}

// appendSize counts an append's records and bytes per partition.
func appendSize(a Append) (records, bytes map[int32]int64) {
	records, bytes = make(map[int32]int64, len(a.Batches)), make(map[int32]int64, len(a.Batches))
	for _, b := range a.Batches {
		info, err := batch.Peek(b.Batch)
		if err != nil {
			continue // validateAppend refuses it
		}
		records[b.Partition] += int64(info.LastOffsetDelta) + 1
		bytes[b.Partition] += int64(len(b.Batch))
	}
	return records, bytes
}

// admit checks an append against the topic's backlog bounds. ends are the
// partitions' end offsets to measure against: the state machine's in Apply,
// the logs' on the leader's pre-check. Groups are checked in name order so
// the error names the same group everywhere. A group that counts exact
// bytes is checked with the append's record sizes (appendRecordBytes),
// returned for noteAppend; one that estimates, with its batches' bytes.
func (f *FSM) admit(t *Topic, a Append, ends []int64, now int64) (map[int32]int64, error) {
	f.queues.mu.RLock()
	defer f.queues.mu.RUnlock()
	groups := f.queues.byTopic[t.Name]
	if len(groups) == 0 {
		return nil, nil
	}
	var sizes map[int32]int64
	for _, q := range groups {
		if q.ExactBytes() {
			var err error
			if sizes, err = f.appendRecordBytes(a); err != nil {
				return nil, err
			}
			break
		}
	}
	maxRecords, maxBytes := configInt(t.Config, ConfigQueueMaxBacklogRecords), configInt(t.Config, ConfigQueueMaxBacklogBytes)
	maxAge := configInt(t.Config, ConfigQueueMaxBacklogAgeMs)
	if maxRecords < 0 && maxBytes < 0 && maxAge < 0 {
		return sizes, nil
	}
	var addRecords, addBatchBytes, addRecordBytes int64
	recs, bytes := appendSize(a)
	for _, n := range recs {
		addRecords += n
	}
	for _, n := range bytes {
		addBatchBytes += n
	}
	for _, n := range sizes {
		addRecordBytes += n
	}
	names := make([]string, 0, len(groups))
	for name := range groups {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		q := groups[name]
		b := q.Backlog(ends)
		if maxRecords >= 0 && b.Records+addRecords > maxRecords {
			if addRecords > maxRecords {
				return nil, fmt.Errorf("%w: an append of %d records can never fit queue.max.backlog.records=%d of %s", backend.ErrInvalidArgument, addRecords, maxRecords, t.Name)
			}
			rate, _ := q.DrainRate(now)
			return nil, overloaded(t.Name, name, "records", b.Records, addRecords, maxRecords, rate)
		}
		addBytes := addBatchBytes
		if q.ExactBytes() {
			addBytes = addRecordBytes
		}
		if maxBytes >= 0 && b.Bytes+addBytes > maxBytes {
			if addBytes > maxBytes {
				return nil, fmt.Errorf("%w: an append of %d bytes can never fit queue.max.backlog.bytes=%d of %s", backend.ErrInvalidArgument, addBytes, maxBytes, t.Name)
			}
			records, bytes := q.DrainRate(now)
			if !q.ExactBytes() && b.Records > 0 {
				bytes = records * float64(b.Bytes) / float64(b.Records)
			}
			return nil, overloaded(t.Name, name, "bytes", b.Bytes, addBytes, maxBytes, bytes)
		}
		if maxAge < 0 {
			continue
		}
		// The age bound is a key of QueueLevel, so every group counts
		// append times (OldestAppend) by the time it is set.
		if oldest, ok := q.OldestAppend(ends); ok && now-oldest > maxAge*int64(time.Millisecond) {
			rate, _ := q.DrainRate(now)
			cutoff := now - maxAge*int64(time.Millisecond)
			excess := q.AppendedBefore(cutoff, ends)
			return nil, &backend.OverloadedError{Topic: t.Name, Group: name, Bound: "age", Backlog: (now - oldest) / int64(time.Millisecond),
				Limit: maxAge, DrainPerSec: rate, RetryAfter: queue.RetryAfter(float64(excess), rate)}
		}
	}
	return sizes, nil
}

// noteAppend tells the topic's queue groups what an applied append added:
// records and batch bytes for the estimate, and, once the groups count
// exact bytes, the records' sizes (as admit returned them; nil when no
// group counts them) and the append's time. bases are the batches' first
// offsets. It runs for every applied append, replays included, like the
// rest of the queue state.
func (f *FSM) noteAppend(t *Topic, a Append, bases []int64, sizes map[int32]int64, now int64) {
	f.queues.mu.RLock()
	has := len(f.queues.byTopic[t.Name]) > 0
	f.queues.mu.RUnlock()
	if !has {
		return
	}
	f.queues.mu.Lock()
	defer f.queues.mu.Unlock()
	for _, q := range f.queues.byTopic[t.Name] {
		q.Tick(now)
		for i, b := range a.Batches {
			info, err := batch.Peek(b.Batch)
			if err != nil {
				continue // validateAppend refused it
			}
			q.NoteAppend(queue.Appended{Partition: b.Partition, Base: bases[i], Records: int64(info.LastOffsetDelta) + 1,
				BatchBytes: int64(len(b.Batch)), RecordBytes: sizes[b.Partition], At: now})
		}
	}
}

// appendRecordBytes sums, per partition, the sizes of an append's records
// as a claim sees them (queueSource.RecordInfo: key, value, header keys
// and values; control records and records of a codec the applied level
// does not read count nothing).
func (f *FSM) appendRecordBytes(a Append) (map[int32]int64, error) {
	out := make(map[int32]int64, len(a.Batches))
	for _, b := range a.Batches {
		info, err := batch.Peek(b.Batch)
		if err != nil || !f.decodes(info.Compression()) {
			continue
		}
		bt, _, err := batch.Decode(b.Batch)
		if err != nil {
			return nil, fmt.Errorf("%w: partition %d: %v", backend.ErrInvalidArgument, b.Partition, err)
		}
		if bt.IsControl() {
			continue
		}
		for _, r := range bt.Records {
			out[b.Partition] += recordSize(r)
		}
	}
	return out, nil
}

// recordSize is a record's size as queue groups count it: its key, value,
// and header keys and values.
func recordSize(r batch.Record) int64 {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// Admit checks an append against the topic's queue backlog bounds as they
// stand in the partition logs now: the leader's early refusal of what
// Apply would refuse (Apply decides, against its own end offsets).
func (f *FSM) Admit(t *Topic, a Append) error {
	_, err := f.admit(t, a, queueReadEnds(t), f.Now())
	return err
}
