package histcheck

import (
	"cmp"
	"fmt"
	"slices"
)

// CheckFollowerReads checks follower reads (ok reads with Leader false),
// which may trail the leader but never go back: for one client reading
// one partition from one node, in call order, the end offset never
// shrinks, an offset below an end already seen is never out of range, and
// an offset never shows two values. It also checks every follower read
// against every other answer about the same offset (ok appends, ok
// reads, leader or follower, and final scans, which it shows as reads):
// one offset never holds two values.
func CheckFollowerReads(ops []Op, opt Options) Verdict {
	v := Verdict{Checker: "follower-reads"}
	mx := opt.maxViolations()

	// known: per partition and offset, the first ok answer naming a value.
	type slot struct {
		k      partitionKey
		offset int64
	}
	known := map[slot]*Op{}
	for i := range ops {
		op := &ops[i]
		if op.Outcome != OK {
			continue
		}
		if op.Kind == Append || (op.Kind == Read && op.Leader && !op.OutOfRange) {
			s := slot{partitionKey{op.Topic, op.Partition}, op.Offset}
			if known[s] == nil {
				known[s] = op
			}
		}
		if op.Kind == Scan {
			for _, r := range op.Records {
				s := slot{partitionKey{op.Topic, op.Partition}, r.Offset}
				if known[s] == nil {
					known[s] = &Op{ID: op.ID, Kind: Read, Client: op.Client, Node: op.Node, Call: op.Call, Return: op.Return,
						Outcome: OK, Topic: op.Topic, Partition: op.Partition, Offset: r.Offset, Value: r.Value, End: int64(len(op.Records))}
				}
			}
		}
	}

	type stream struct {
		client int
		node   string
		k      partitionKey
	}
	streams := map[stream][]*Op{}
	for i := range ops {
		op := &ops[i]
		if op.Kind != Read || op.Leader || op.Outcome != OK {
			continue
		}
		s := stream{op.Client, op.Node, partitionKey{op.Topic, op.Partition}}
		streams[s] = append(streams[s], op)
		v.Checked++
		if op.OutOfRange {
			continue
		}
		sl := slot{s.k, op.Offset}
		if other := known[sl]; other == nil {
			known[sl] = op
		} else if other.Value != op.Value {
			v.add(mx, "inconsistent: %s offset %d holds %q for %s but %q for %s", s.k, op.Offset, other.Value, other, op.Value, op)
		}
	}

	keys := make([]stream, 0, len(streams))
	for s := range streams {
		keys = append(keys, s)
	}
	slices.SortFunc(keys, func(a, b stream) int {
		return cmp.Or(cmp.Compare(a.client, b.client), cmp.Compare(a.node, b.node), comparePartitions(a.k, b.k))
	})
	for _, s := range keys {
		reads := streams[s]
		slices.SortFunc(reads, func(a, b *Op) int { return cmp.Compare(a.Call, b.Call) })
		var maxEnd *Op
		seen := map[int64]*Op{}
		for _, op := range reads {
			who := fmt.Sprintf("client %d on %s, %s", s.client, s.node, s.k)
			if maxEnd != nil && op.End < maxEnd.End {
				v.add(mx, "went back: %s: end %d after end %d: %s after %s", who, op.End, maxEnd.End, op, maxEnd)
			} else if maxEnd != nil && op.OutOfRange && op.Offset < maxEnd.End {
				v.add(mx, "went back: %s: offset %d out of range after end %d: %s after %s", who, op.Offset, maxEnd.End, op, maxEnd)
			}
			if maxEnd == nil || op.End > maxEnd.End {
				maxEnd = op
			}
			if op.OutOfRange {
				continue
			}
			if prev := seen[op.Offset]; prev != nil && prev.Value != op.Value {
				v.add(mx, "changed: %s: offset %d read %q, then %q: %s after %s", who, op.Offset, prev.Value, op.Value, op, prev)
			}
			seen[op.Offset] = op
		}
	}
	v.Note = fmt.Sprintf("follower reads by %d client/node/partition streams", len(streams))
	return v
}
