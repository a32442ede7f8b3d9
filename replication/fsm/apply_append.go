package fsm

import (
	"fmt"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/dedup"
	"github.com/logd-dev/logd/log"
)

// maxAppendBatchBytes caps one batch in a Raft entry. A batch is also
// checked against its topic's max.message.bytes here, as the topic's
// replicated config says at this index, rather than by the log (which
// would fail inside Apply and stop the node): the logs are opened with
// this cap as their bound (openTopic), since max.message.bytes may change.
const maxAppendBatchBytes = maxRecordBatchLimit

// validateAppend checks every batch of an Append against the topic before
// anything is written, so an Append is applied whole or not at all. With
// crc false it checks all but the batches' CRCs (ValidateVerifiedAppend);
// Apply always checks them.
func validateAppend(t *Topic, a Append, crc bool) error {
	if len(a.Batches) == 0 {
		return fmt.Errorf("%w: append without batches", backend.ErrInvalidArgument)
	}
	seen := make(map[int32]bool, len(a.Batches))
	for _, b := range a.Batches {
		if b.Partition < 0 || int(b.Partition) >= len(t.Partitions) {
			return fmt.Errorf("%w: %s has %d partitions, not %d", backend.ErrUnknownPartition, t.Name, len(t.Partitions), b.Partition)
		}
		if err := checkHosted(t, b.Partition); err != nil {
			return err
		}
		if seen[b.Partition] {
			// One batch per partition per command keeps idempotency by Raft
			// index exact: a partition holds at most one batch per index.
			return fmt.Errorf("%w: partition %d twice in one append", backend.ErrInvalidArgument, b.Partition)
		}
		seen[b.Partition] = true
		if limit := min(t.MaxBatchBytes(), maxAppendBatchBytes); int64(len(b.Batch)) > limit {
			return fmt.Errorf("%w: batch of %d bytes for %s-%d, %s max.message.bytes is %d", backend.ErrRecordTooLarge, len(b.Batch), t.Name, b.Partition, t.Name, limit)
		}
		var info batch.Info
		var err error
		if crc {
			info, err = batch.Verify(b.Batch)
		} else {
			info, err = batch.Peek(b.Batch)
		}
		if err == nil && info.Length != len(b.Batch) {
			err = fmt.Errorf("%d bytes after the batch", len(b.Batch)-info.Length)
		}
		if err != nil {
			// Both wrapped: a damaged batch is *batch.CRCError too.
			return fmt.Errorf("%w: %s-%d: %w", backend.ErrInvalidArgument, t.Name, b.Partition, err)
		}
		// A key repeated within one append is not checked here: the server
		// answers repeats within a call itself, and were one to arrive, the
		// later record would simply own the key (deterministically).
		for _, k := range b.Keys {
			switch {
			case k.Key == "":
				return fmt.Errorf("%w: empty idempotency key", backend.ErrInvalidArgument)
			case len(k.Key) > dedup.MaxIdempotencyKeyBytes:
				return fmt.Errorf("%w: idempotency key of %d bytes, at most %d", backend.ErrInvalidArgument, len(k.Key), dedup.MaxIdempotencyKeyBytes)
			case k.Index < 0 || k.Index > info.LastOffsetDelta:
				return fmt.Errorf("%w: idempotency key for record %d of a %d-record batch", backend.ErrInvalidArgument, k.Index, info.LastOffsetDelta+1)
			}
		}
	}
	return nil
}

func (f *FSM) applyAppend(index uint64, now int64, a Append) any {
	t, err := f.Topic(a.Topic)
	if err != nil {
		return err
	}
	if err := validateAppend(t, a, true); err != nil {
		return err
	}
	// An idempotent producer's batch is judged by its partition's
	// producer state first (producers.go): a duplicate is answered with
	// its original offset and a refused batch with its error, and only the
	// rest is written, as one append.
	var verdicts producerVerdicts
	write := a
	if a.producers {
		verdicts, write = f.judgeProducers(t, a, now)
		if len(write.Batches) == 0 {
			return verdicts.result(nil)
		}
	}
	sizes, err := f.admit(t, write, queueEnds(t), now)
	if err != nil {
		return err
	}
	// Record the keys, unless one was committed since the proposer looked
	// them up: then this entry is a no-op. The check gives the same answer
	// on every replica and on replay, because the window is replicated
	// state. Offsets are known before the logs are written (p.next), and a
	// failed write stops the node, so the window may change first.
	window := t.IdempotencyWindow()
	inserts := f.dedupScratch[:0]
	for _, b := range write.Batches {
		for _, k := range b.Keys {
			inserts = append(inserts, dedup.Key{Key: k.Key, Entry: partitionDedupEntry(k, b.Partition, t.Partitions[b.Partition].next, now+window)})
		}
	}
	if len(inserts) > 0 {
		held, ok := t.dedup.Admit(now, inserts)
		clear(inserts) // drop the key strings
		f.dedupScratch = inserts[:0]
		if !ok {
			return fmt.Errorf("%w: %q", backend.ErrDedupRace, held)
		}
	}
	res := AppendResult{BaseOffsets: make([]int64, len(write.Batches))}
	meta := log.AppendMeta{AppliedIndex: index, Time: time.Unix(0, now)}
	for i, b := range write.Batches {
		p := t.Partitions[b.Partition]
		base := p.next
		if p.unwritten(index, base) {
			got, err := p.log.Append(b.Batch, meta)
			if err != nil {
				return f.stop(fmt.Errorf("append %s-%d at index %d: %w", a.Topic, b.Partition, index, err))
			}
			if got != base {
				return f.stop(fmt.Errorf("append %s-%d at index %d: log assigned offset %d, state machine expected %d", a.Topic, b.Partition, index, got, base))
			}
			f.bytesSinceSnapshot.Add(int64(len(b.Batch)))
			p.unsynced.Add(int64(len(b.Batch)))
		}
		// else: replayed after a restart; the log already holds it.
		info, _ := batch.Peek(b.Batch) // verified above
		p.next = base + int64(info.LastOffsetDelta) + 1
		res.BaseOffsets[i] = base
		if a.producers && info.ProducerID >= 0 {
			p.producers.record(&info, base, now)
		}
	}
	f.noteAppend(t, write, res.BaseOffsets, sizes, now)
	for _, b := range write.Batches {
		t.Partitions[b.Partition].signal()
	}
	if verdicts != nil {
		return verdicts.result(res.BaseOffsets)
	}
	return res
}

// producerVerdict is the producer state's judgement of one batch of an
// append: written (the written'th batch written), a duplicate of the batch
// at base, or refused with err.
type producerVerdict struct {
	written int
	dup     bool
	base    int64
	err     error
}

type producerVerdicts []producerVerdict

// judgeProducers judges every batch of a with a producer id against its
// partition's producer state at now, and returns the verdicts and the
// append of the batches to write.
func (f *FSM) judgeProducers(t *Topic, a Append, now int64) (producerVerdicts, Append) {
	verdicts := make(producerVerdicts, len(a.Batches))
	write := Append{Topic: a.Topic, producers: true}
	for i, b := range a.Batches {
		info, _ := batch.Peek(b.Batch) // verified by validateAppend
		v := &verdicts[i]
		if info.ProducerID >= 0 {
			v.base, v.dup, v.err = t.Partitions[b.Partition].producers.check(&info, now)
		}
		if v.dup || v.err != nil {
			continue
		}
		v.written = len(write.Batches)
		write.Batches = append(write.Batches, b)
	}
	return verdicts, write
}

// result is the AppendResult of an append judged into vs, whose written
// batches got bases.
func (vs producerVerdicts) result(bases []int64) AppendResult {
	res := AppendResult{BaseOffsets: make([]int64, len(vs))}
	for i, v := range vs {
		switch {
		case v.err != nil:
			if res.Errors == nil {
				res.Errors = make([]error, len(vs))
			}
			res.Errors[i], res.BaseOffsets[i] = v.err, -1
		case v.dup:
			if res.Duplicates == nil {
				res.Duplicates = make([]bool, len(vs))
			}
			res.BaseOffsets[i], res.Duplicates[i] = v.base, true
		default:
			res.BaseOffsets[i] = bases[v.written]
		}
	}
	return res
}

// ValidateAppend checks every batch of an Append against the topic as
// Apply will.
func ValidateAppend(t *Topic, a Append) error { return validateAppend(t, a, true) }

// ValidateVerifiedAppend is ValidateAppend for batches whose CRCs the
// caller has checked since they were read off the network, or which it
// built: it checks all the rest. Apply checks the CRCs again.
func ValidateVerifiedAppend(t *Topic, a Append) error { return validateAppend(t, a, false) }
