package queue

import "math"

// PartitionStats describes one partition of a queue group at a time.
type PartitionStats struct {
	Partition int32
	// Start: every offset below it is finished. Next: offsets at or above
	// it were never delivered. End: the partition's end offset.
	Start, Next, End int64
	// Ready counts records available now (fresh ones included), InFlight
	// those under a live lease, Delayed those waiting out a backoff,
	// DeadPending those decided for the dead-letter topic and not yet moved.
	Ready, InFlight, Delayed, DeadPending int64
	// Acked and DeadLettered count finished records since the group began.
	Acked, DeadLettered int64
	// AtCap: fresh records are waiting but the in-flight cap is reached.
	AtCap bool
	// OldestReady is the lowest ready offset (-1 if none); its record's
	// timestamp gives the oldest ready age.
	OldestReady int64
	// OldestInFlightSince is the delivery time (Unix ns) of the longest
	// running live lease, 0 if none.
	OldestInFlightSince int64
	// Nacked and Expired count nacks and expired leases since the group
	// began (expiries are counted when a claim settles them).
	Nacked, Expired int64
}

// Stats describes every partition at now; ends holds the partitions' end
// offsets. It only reads: lazy expiry is counted, not applied.
func (q *Group) Stats(now int64, ends []int64) []PartitionStats {
	out := make([]PartitionStats, len(q.parts))
	for pi, p := range q.parts {
		s := PartitionStats{Partition: int32(pi), Start: p.Start, Next: p.Next, OldestReady: -1,
			Acked: p.Acked, DeadLettered: p.DeadLettered, Nacked: p.Nacked, Expired: p.Expired}
		if pi < len(ends) {
			s.End = ends[pi]
		}
		for _, r := range p.Tracked {
			st := r.State
			if st == leaseInFlight && now >= r.Until {
				st = leaseReady
				if int(r.Deliveries) >= q.cfg.MaxDeliveries {
					st = leaseDeadPending
				}
			}
			if st == leaseDelayed && now >= r.Until {
				st = leaseReady
			}
			switch st {
			case leaseReady:
				s.Ready++
				if s.OldestReady < 0 {
					s.OldestReady = r.Offset
				}
			case leaseInFlight:
				s.InFlight++
				if s.OldestInFlightSince == 0 || r.Last < s.OldestInFlightSince {
					s.OldestInFlightSince = r.Last
				}
			case leaseDelayed:
				s.Delayed++
			case leaseDeadPending:
				s.DeadPending++
			}
		}
		if fresh := s.End - p.Next; fresh > 0 {
			s.Ready += fresh
			if s.OldestReady < 0 {
				s.OldestReady = p.Next
			}
			s.AtCap = p.Live >= q.cfg.MaxInFlight
		}
		out[pi] = s
	}
	return out
}

// Claimable reports whether a claim at now could deliver or settle
// anything, and otherwise the earliest time one could without new records
// (math.MaxInt64 if none). A server waits with it instead of proposing
// empty claims.
func (q *Group) Claimable(now int64, ends []int64) (bool, int64) {
	wake := int64(math.MaxInt64)
	if q.paused {
		return false, wake
	}
	for pi, p := range q.parts {
		if now >= p.Wake || p.DeadPending > 0 {
			return true, now
		}
		if pi < len(ends) && p.Next < ends[pi] && p.Live < q.cfg.MaxInFlight {
			return true, now
		}
		wake = min(wake, p.Wake)
	}
	return false, wake
}

// InFlightRecord is a record under a live lease, for describe.
type InFlightRecord struct {
	Partition int32
	Offset    int64
	// Worker is the worker id its claim named ("" for none).
	Worker string
	// Delivery is the delivery's number, Delivered when it was claimed
	// and LeaseUntil when its lease ends (Unix ns); Extends counts its
	// extends.
	Delivery   uint32
	Delivered  int64
	LeaseUntil int64
	Extends    uint32
}

// InFlight lists the records under a live lease at now, by partition and
// offset, at most limit of them (limit <= 0: all); more reports that the
// list was cut. It only reads.
func (q *Group) InFlight(now int64, limit int) (out []InFlightRecord, more bool) {
	for pi, p := range q.parts {
		for _, r := range p.Tracked {
			if !r.live(now) {
				continue
			}
			if limit > 0 && len(out) >= limit {
				return out, true
			}
			out = append(out, InFlightRecord{Partition: int32(pi), Offset: r.Offset, Worker: r.Worker, Delivery: r.Deliveries,
				Delivered: r.Last, LeaseUntil: r.Until, Extends: r.Extends})
		}
	}
	return out, false
}
