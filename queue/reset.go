package queue

import (
	"fmt"
	"math"
)

// PartitionStart is a partition's new start offset (SetStarts).
type PartitionStart struct {
	Partition int32
	Offset    int64
}

// SetStarts moves the start of each partition named to its offset: every
// offset below it counts as finished and every offset from it on as
// never delivered, so the next claims deliver from it, whether that is
// before the old start (records worked again) or after (records
// skipped, neither acked nor dead-lettered). The partition's tracked
// records, their histories and the deliveries it remembers are
// forgotten, so the tokens handed out before are stale. The counts of
// acked, dead-lettered and nacked records stay.
//
// It refuses (ErrInvalidRequest, changing nothing) a partition outside
// the group, an offset below 0 or past the partition's end in ends (the
// end offsets as of the command), and a group with a live lease at now
// (ErrGroupBusy): a worker holding a record is working it.
//
// While the group counts exact bytes, the fresh records from each new
// start are sized through src (a scan, as SetExactBytes does) and their
// append times are kept where marks cover them; records before the
// oldest mark count as appended at its time, or at now when the
// partition has none (SetExactBytes' convention). An error of src (I/O) leaves the group half reset:
// the caller must stop.
//
// The Kafka listener moves a share group's start offsets this way
// (AlterShareGroupOffsets; docs/kafka.md, "Share groups").
func (q *Group) SetStarts(now int64, starts []PartitionStart, src RecordSource, ends []int64) error {
	if len(ends) != len(q.parts) {
		return fmt.Errorf("%w: %d end offsets for %d partitions", ErrInvalidRequest, len(ends), len(q.parts))
	}
	for _, s := range starts {
		if s.Partition < 0 || int(s.Partition) >= len(q.parts) {
			return fmt.Errorf("%w: partition %d outside the group's %d", ErrInvalidRequest, s.Partition, len(q.parts))
		}
		if s.Offset < 0 || s.Offset > ends[s.Partition] {
			return fmt.Errorf("%w: start offset %d of partition %d outside [0, %d]", ErrInvalidRequest, s.Offset, s.Partition, ends[s.Partition])
		}
	}
	if recs, _ := q.InFlight(now, 1); len(recs) > 0 {
		return fmt.Errorf("%w: partition %d offset %d is leased until %d", ErrGroupBusy, recs[0].Partition, recs[0].Offset, recs[0].LeaseUntil)
	}
	for _, s := range starts {
		p := q.parts[s.Partition]
		for _, r := range p.Tracked {
			q.dropHistory(r)
		}
		p.Tracked, p.Live, p.DeadPending, p.LiveBytes = nil, 0, 0, 0
		p.Recent, p.RecentPos = nil, 0
		p.Start, p.Next, p.Wake = s.Offset, s.Offset, math.MaxInt64
		if !q.exact {
			continue
		}
		p.FreshBytes = 0
		for off := s.Offset; off < ends[s.Partition]; off++ {
			info, err := src.RecordInfo(s.Partition, off)
			if err != nil {
				return err
			}
			if info.Exists {
				p.FreshBytes += int64(info.Size)
			}
		}
		if len(p.Appended) == 0 || p.Appended[0].Offset > s.Offset {
			at := now
			if len(p.Appended) > 0 {
				at = min(at, p.Appended[0].At)
			}
			p.Appended = append([]appendMark{{Offset: s.Offset, At: at}}, p.Appended...)
		}
		p.trimMarks()
		if s.Offset >= ends[s.Partition] {
			p.Appended = nil
		}
	}
	return nil
}
