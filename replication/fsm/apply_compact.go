package fsm

import (
	"errors"
	"fmt"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/log"
)

// CompactResult is the outcome of an applied Compact.
type CompactResult struct {
	// Skipped is true when the partition's segments no longer match the
	// command's sources (already compacted before a restart, or changed
	// since): nothing was done.
	Skipped bool
	Stats   log.CompactionStats
}

// sourcesOf describes the closed segments a compaction below below would
// read now.
func sourcesOf(segs []log.SegmentInfo, below int64) []SourceSegment {
	var out []SourceSegment
	for _, s := range segs {
		if !s.Closed || s.EndOffset > below {
			break
		}
		out = append(out, SourceSegment{Base: s.BaseOffset, End: s.EndOffset, Bytes: s.Bytes, Compacted: s.Compacted})
	}
	return out
}

func sameSources(a, b []SourceSegment) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (f *FSM) applyCompact(index uint64, now int64, c Compact) any {
	t, p, err := f.cleanerPartition(c.Topic, c.TopicIndex, c.Partition)
	if err != nil {
		return err
	}
	k := partKey{c.Topic, c.TopicIndex, c.Partition}
	prep := f.cleaner.take(k)
	discard := func() {
		if prep != nil {
			prep.c.Discard()
			prep = nil
		}
	}
	defer discard()
	if len(c.Sources) == 0 || c.Below > f.ProtectedFrom(t, c.Partition) ||
		!sameSources(sourcesOf(p.log.Segments(), c.Below), c.Sources) {
		// Not a run: a replay after a restart skips compactions it already
		// applied, and must not hide the run it restored from a snapshot.
		return CompactResult{Skipped: true}
	}
	opts := log.CompactOptions{Below: c.Below, TombstoneHorizon: c.Horizon, Codec: f.RecordCodec()}
	before := p.log.Size()
	// Wall time of the apply, for the log line only (not state).
	start, preparedHere := f.clock(), false
	for attempt := 0; ; attempt++ {
		if prep == nil || prep.below != c.Below || prep.horizon != c.Horizon {
			preparedHere = true
			discard()
			// Not prepared here (a follower, or a replay): the same inputs
			// give the same bytes, prepared now on the FSM goroutine.
			cc, err := p.log.PrepareCompaction(opts)
			if err != nil {
				return f.stop(fmt.Errorf("compact %s-%d below %d at index %d: %w", c.Topic, c.Partition, c.Below, index, err))
			}
			prep = &preparedCompaction{below: c.Below, horizon: c.Horizon, c: cc}
		}
		if sum := prep.c.Checksum(); sum != c.Checksum {
			return f.stop(fmt.Errorf("compact %s-%d below %d at index %d: %w: checksum %08x, leader's %08x",
				c.Topic, c.Partition, c.Below, index, backend.ErrDiverged, sum, c.Checksum))
		}
		err := p.log.CommitCompaction(prep.c)
		if errors.Is(err, log.ErrCompactionStale) && attempt == 0 {
			prep = nil // prepared against segments that were replaced since
			continue
		}
		if err != nil {
			return f.stop(fmt.Errorf("compact %s-%d below %d at index %d: %w", c.Topic, c.Partition, c.Below, index, err))
		}
		break
	}
	st := prep.c.Stats()
	prep = nil
	f.cleaner.retire(p.log)
	f.segmentsChanged.Store(true)
	res := CompactResult{Stats: st}
	deleted := before - p.log.Size()
	removed := st.InputRecords - st.OutputRecords
	f.cleaner.compactions.Add(1)
	f.cleaner.bytesDeleted.Add(deleted)
	f.cleaner.recordsCompacted.Add(removed)
	f.cleaner.setRun(k, backend.CleanerRun{TimeNanos: now, Action: "compact", BytesDeleted: deleted, RecordsRemoved: removed})
	f.logger.Info("compacted", "topic", c.Topic, "partition", c.Partition, "below", c.Below, "segments", st.Segments,
		"input_bytes", st.InputBytes, "output_bytes", st.OutputBytes, "records_removed", removed,
		"prepared_in_apply", preparedHere, "apply_duration", f.clock().Sub(start))
	return res
}
