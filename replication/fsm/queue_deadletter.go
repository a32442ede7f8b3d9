package fsm

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/queue"
)

// maxDeadLettersPerCommand bounds the records one command dead-letters.
const maxDeadLettersPerCommand = 1000

// dlqTopicConfig is the config of an automatically created dead-letter
// topic: room for the source's largest record plus the added headers.
func dlqTopicConfig(src *Topic) map[string]string {
	limit := min(src.MaxBatchBytes()+64<<10, maxRecordBatchLimit)
	return map[string]string{ConfigMaxMessageBytes: strconv.FormatInt(limit, 10)}
}

// DeadLetterTopicCreate is the creation of src's dead-letter topic name
// as a queue group's creation makes it when missing: src's partition
// count and placement, and room for its largest record. The meta group's
// leader proposes it before a queue group on a topic placed over data
// groups, so the data groups adopt the topic the meta group created.
func DeadLetterTopicCreate(src *Topic, name string) CreateTopic {
	return CreateTopic{Name: name, Partitions: int32(len(src.Partitions)), Config: dlqTopicConfig(src),
		Placement: src.Placement, PlacementEpoch: src.PlacementEpoch}
}

// ensureDeadLetterTopic returns the dead-letter topic, creating it at this
// index when missing (at group creation, or after someone deleted it).
func (f *FSM) ensureDeadLetterTopic(index uint64, now int64, src *Topic, name string) (*Topic, error) {
	if t, err := f.Topic(name); err == nil {
		return t, nil
	}
	// A sparse origin's dead-letter topic follows its placement, so each
	// dead letter stays in its origin partition's data group.
	res := f.applyCreateTopic(index, now, DeadLetterTopicCreate(src, name))
	if err, ok := res.(error); ok {
		return nil, fmt.Errorf("create dead-letter topic %s: %w", name, err)
	}
	return res.(*Topic), nil
}

// flushDeadLetters moves the group's pending dead letters to its
// dead-letter topic and marks them finished, in this one command: a record
// is never both live and dead, or neither. Each dead-letter partition gets
// at most one batch per command (idempotency by Raft index), bounded by the
// topic's max.message.bytes; what does not fit stays pending for the next
// command. Errors are fatal (the caller stops the node).
func (f *FSM) flushDeadLetters(index uint64, now int64, q *queue.Group, src *Topic, records *queueSource) (int, error) {
	pend := q.PendingDeadLetters(maxDeadLettersPerCommand)
	if len(pend) == 0 {
		return 0, nil
	}
	dlq, err := f.ensureDeadLetterTopic(index, now, src, q.Config().DeadLetterTopic)
	if err != nil {
		return 0, err
	}
	budget := int(dlq.MaxBatchBytes()) - batch.HeaderSize
	keys := idempotencyKeys(src, pend, now)
	byPart := map[int32][]batch.Record{}
	sizes := map[int32]int{}
	var done []queue.DeadLetter
	for _, d := range pend {
		r, err := records.record(d.Partition, d.Offset)
		if err != nil {
			return 0, err
		}
		rec := deadLetterRecord(src.Name, q.Name(), d, r, keys, now, f.AppliedLevel() >= QueueLevel)
		dp, ok := deadLetterPartition(dlq, d.Partition)
		if !ok {
			continue // stays pending: no partition of dlq is hosted here
		}
		size := batch.RecordSize(rec) + 16
		if len(byPart[dp]) > 0 && sizes[dp]+size > budget {
			continue // next command
		}
		if size > budget {
			// Alone too large for the topic: keep the evidence, drop the
			// payload rather than block the group.
			rec.Value = nil
			rec.Headers = append(rec.Headers, batch.Header{Key: "logd-dlq-value-dropped", Value: []byte(strconv.Itoa(len(r.Value)))})
		}
		byPart[dp] = append(byPart[dp], rec)
		sizes[dp] += size
		done = append(done, d)
	}
	parts := make([]int32, 0, len(byPart))
	for p := range byPart {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	meta := log.AppendMeta{AppliedIndex: index, Time: time.Unix(0, now)}
	for _, dp := range parts {
		b, err := batch.Build(byPart[dp])
		if err != nil {
			return 0, fmt.Errorf("build dead-letter batch for %s-%d: %w", dlq.Name, dp, err)
		}
		p := dlq.Partitions[dp]
		if p.unwritten(index, p.next) {
			got, err := p.log.Append(b, meta)
			if err != nil {
				return 0, fmt.Errorf("append dead letters to %s-%d at index %d: %w", dlq.Name, dp, index, err)
			}
			if got != p.next {
				return 0, fmt.Errorf("append dead letters to %s-%d at index %d: log assigned offset %d, state machine expected %d", dlq.Name, dp, index, got, p.next)
			}
			f.bytesSinceSnapshot.Add(int64(len(b)))
			p.unsynced.Add(int64(len(b)))
		}
		p.next += int64(len(byPart[dp]))
		p.signal()
		f.noteDeadLetters(dlq, dp, p.next-int64(len(byPart[dp])), byPart[dp], len(b), now)
	}
	q.MarkDeadLettered(done)
	return len(done), nil
}

// noteDeadLetters tells the queue groups of a dead-letter topic (a topic
// like any other) what a dead-letter batch added, as noteAppend does for
// appends. The caller holds queues.mu.
func (f *FSM) noteDeadLetters(dlq *Topic, part int32, base int64, recs []batch.Record, batchBytes int, now int64) {
	var size int64
	for _, r := range recs {
		size += recordSize(r)
	}
	for _, g := range f.queues.byTopic[dlq.Name] {
		g.Tick(now)
		g.NoteAppend(queue.Appended{Partition: part, Base: base, Records: int64(len(recs)), BatchBytes: int64(batchBytes), RecordBytes: size, At: now})
	}
}

// deadLetterRecord builds the dead-letter copy of a record. r may be nil if
// the record is gone (then only the evidence headers remain). From
// QueueLevel (history) it adds the attempt history (queue_history.go).
func deadLetterRecord(topic, groupName string, d queue.DeadLetter, r *batch.Record, keys map[[2]int64]string, now int64, history bool) batch.Record {
	rec := batch.Record{Timestamp: now / int64(time.Millisecond)}
	var hist batch.Header
	if r != nil {
		rec.Key, rec.Value = r.Key, r.Value
		headers := r.Headers
		if history {
			hist, headers = historyHeader(d, r.Headers)
		}
		rec.Headers = append(rec.Headers, headers...)
	} else if history {
		hist, _ = historyHeader(d, nil)
	}
	add := func(k, v string) { rec.Headers = append(rec.Headers, batch.Header{Key: k, Value: []byte(v)}) }
	ts := func(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }
	add(backend.DLQHeaderReason, d.Reason)
	if d.LastError != "" {
		add(backend.DLQHeaderError, d.LastError)
	}
	add(backend.DLQHeaderTopic, topic)
	add(backend.DLQHeaderPartition, strconv.Itoa(int(d.Partition)))
	add(backend.DLQHeaderOffset, strconv.FormatInt(d.Offset, 10))
	add(backend.DLQHeaderGroup, groupName)
	add(backend.DLQHeaderDeliveries, strconv.Itoa(int(d.Deliveries)))
	if d.Deliveries > 0 {
		add(backend.DLQHeaderFirstDelivery, ts(d.FirstDelivered))
		add(backend.DLQHeaderLastDelivery, ts(d.LastDelivered))
	}
	if k, ok := keys[[2]int64{int64(d.Partition), d.Offset}]; ok {
		add(backend.DLQHeaderIdempotencyKey, k)
	}
	add(backend.DLQHeaderDeadLetteredAt, ts(now))
	if history {
		rec.Headers = append(rec.Headers, hist)
	}
	return rec
}

// idempotencyKeys maps the (partition, offset) of each pending dead letter
// to the idempotency key its record was produced with, from the topic's
// window (replicated state, so the same on every replica). Keys that left
// the window are not found.
func idempotencyKeys(t *Topic, pend []queue.DeadLetter, now int64) map[[2]int64]string {
	if t.dedup == nil {
		return nil
	}
	at := make(map[[2]int64]string, len(pend))
	for _, d := range pend {
		at[[2]int64{int64(d.Partition), d.Offset}] = ""
	}
	t.dedup.KeysAt(now, at)
	for pos, k := range at {
		if k == "" {
			delete(at, pos)
		}
	}
	return at
}

// deadLetterPartition is the partition of dlq a dead letter of origin
// partition p goes to: p modulo dlq's partitions, or when another data
// group hosts that one (a dead-letter topic placed unlike its origin), the
// next hosted after it. ok is false when dlq has none here.
func deadLetterPartition(dlq *Topic, p int32) (int32, bool) {
	n := int32(len(dlq.Partitions))
	for i := int32(0); i < n; i++ {
		if dp := (p + i) % n; dlq.Partitions[dp] != nil {
			return dp, true
		}
	}
	return 0, false
}
