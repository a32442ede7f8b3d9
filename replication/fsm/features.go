package fsm

import (
	"fmt"

	"github.com/logd-dev/logd/batch"
)

// AppliedLevel is the highest feature level an entry applied so far
// needed (BaseLevel at least). An entry at a level is proposed only once
// every member of the cluster registered a build at that level or above
// (package replication), so reaching a level here proves every replica's
// build understands it, at the same Raft index on every replica: apply
// decisions that differ between builds follow this, never the build's own
// Level (see CompressionLevel).
func (f *FSM) AppliedLevel() FeatureLevel {
	return max(FeatureLevel(f.level.Load()), BaseLevel)
}

// raiseLevel records that an entry at level was applied. Cached decodings
// of the logs made under the lower level are dropped: records a lower
// level skipped are read from now on. Reaching QueueLevel makes every
// queue group count its backlog's exact bytes, sized here once from the
// logs (an error is an I/O error: the caller stops).
func (f *FSM) raiseLevel(level FeatureLevel, now int64) error {
	before := f.AppliedLevel()
	f.level.Store(uint32(level))
	if before < CompressionLevel && level >= CompressionLevel {
		f.queues.mu.Lock()
		f.queues.windows = nil
		f.queues.mu.Unlock()
	}
	if before < QueueLevel && level >= QueueLevel {
		return f.exactQueueBytes(now)
	}
	return nil
}

// exactQueueBytes makes every queue group count exact backlog bytes
// and append times (queue.Group.SetExactBytes), against the state
// machine's end offsets, the records already there counting as appended
// at now.
func (f *FSM) exactQueueBytes(now int64) error {
	f.queues.mu.Lock()
	defer f.queues.mu.Unlock()
	for _, q := range f.queues.sortedLocked() {
		if q.ExactBytes() {
			continue
		}
		t, err := f.Topic(q.Topic())
		if err != nil {
			continue // dropped with its topic
		}
		src := f.newQueueSource(t, q.Config().DeadlineHeader, f.queues.windowsLocked(t))
		if err := q.SetExactBytes(src, queueEnds(t), now); err != nil {
			return fmt.Errorf("size the backlog of queue group %s/%s: %w", q.Topic(), q.Name(), err)
		}
	}
	return nil
}

// newCodec reports whether c is a codec of CompressionLevel: the state
// machine of a build before it decoded no snappy, lz4 or zstd batch.
func newCodec(c batch.Compression) bool {
	return c != batch.CompressionNone && c != batch.CompressionGzip
}

// newCodecs reports whether an append carries a batch compressed with a
// codec of CompressionLevel (its payload version is then
// appendCodecsVersion).
func newCodecs(a Append) bool {
	for _, b := range a.Batches {
		if info, err := batch.Peek(b.Batch); err == nil && newCodec(info.Compression()) {
			return true
		}
	}
	return false
}

// decodes reports whether the state machine reads the records of batches
// compressed with c at its applied level: snappy, lz4 and zstd from
// CompressionLevel on. Below it their records are skipped by queue claims
// and refused by compaction, as the builds before it did, so replicas of
// both kinds of build decide alike until every member is upgraded.
func (f *FSM) decodes(c batch.Compression) bool {
	return !newCodec(c) || f.AppliedLevel() >= CompressionLevel
}

// CodecLevel is the feature level a cluster must be at for an append of
// batches compressed with c to be proposed: CompressionLevel for snappy,
// lz4 and zstd, BaseLevel otherwise.
func CodecLevel(c batch.Compression) FeatureLevel {
	if newCodec(c) {
		return CompressionLevel
	}
	return BaseLevel
}
