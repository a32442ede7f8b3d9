package histcheck

import (
	"cmp"
	"fmt"
	"slices"
)

// CheckFinalReads classifies, node by node, what the final scans read
// against what the clients appended (the rules of docs/faults.md):
//
//   - lost: an ok append whose value the node does not hold;
//   - inconsistent: a value held at another place than its ok append
//     said;
//   - duplicate: one value at two places;
//   - unexpected: a value never appended, or whose appends all failed;
//   - gap: offsets that are not dense;
//   - diverged: two nodes holding different values at one offset, or
//     partitions of different lengths.
//
// Only topics that appends wrote to are classified (a dead-letter topic,
// written by the server, is not), and only nodes with a scan of the topic.
// Scans read each partition from offset 0, so a record trimmed by
// retention counts as lost. Unknown and failed appends are never lost.
func CheckFinalReads(ops []Op, opt Options) Verdict {
	v := Verdict{Checker: "final-reads"}
	mx := opt.maxViolations()

	type place struct {
		partition int32
		offset    int64
	}
	type tv struct{ topic, value string }
	attempted := map[tv]bool{} // appended, failed or not
	mayHappen := map[tv]bool{} // by an append not failed
	failed := map[tv]*Op{}
	acked := map[tv]*Op{}
	for i := range ops {
		op := &ops[i]
		if op.Kind != Append {
			continue
		}
		attempted[tv{op.Topic, op.Value}] = true
		if op.Outcome == Failed {
			failed[tv{op.Topic, op.Value}] = op
		} else {
			mayHappen[tv{op.Topic, op.Value}] = true
		}
		if op.Outcome == OK && acked[tv{op.Topic, op.Value}] == nil {
			acked[tv{op.Topic, op.Value}] = op
		}
	}
	topics := map[string]bool{}
	for k := range attempted {
		topics[k.topic] = true
	}

	// Scans by node and topic.
	type nodeTopic struct{ node, topic string }
	scans := map[nodeTopic][]*Op{}
	for i := range ops {
		op := &ops[i]
		if op.Kind != Scan || op.Outcome != OK || !topics[op.Topic] {
			continue
		}
		nt := nodeTopic{op.Node, op.Topic}
		scans[nt] = append(scans[nt], op)
	}
	keys := make([]nodeTopic, 0, len(scans))
	for k := range scans {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b nodeTopic) int { return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.node, b.node)) })

	// first holds, per partition, the first node's records, to compare the
	// others with.
	type firstScan struct {
		node string
		recs []Record
	}
	first := map[partitionKey]firstScan{}
	ackedList := make([]*Op, 0, len(acked))
	for _, op := range acked {
		ackedList = append(ackedList, op)
	}
	slices.SortFunc(ackedList, func(a, b *Op) int { return cmp.Compare(a.ID, b.ID) })
	for _, nt := range keys {
		held := map[string]place{}
		for _, sc := range scans[nt] {
			k := partitionKey{sc.Topic, sc.Partition}
			for i, r := range sc.Records {
				v.Checked++
				if i > 0 && r.Offset != sc.Records[i-1].Offset+1 {
					v.add(mx, "gap: %s %s: offset %d follows %d", nt.node, k, r.Offset, sc.Records[i-1].Offset)
				} else if i == 0 && r.Offset != 0 {
					v.add(mx, "gap: %s %s starts at offset %d, not 0", nt.node, k, r.Offset)
				}
				if prev, dup := held[r.Value]; dup {
					v.add(mx, "duplicate: %s holds %q at %s/%d@%d and %s/%d@%d", nt.node, r.Value, nt.topic, prev.partition, prev.offset, nt.topic, sc.Partition, r.Offset)
				}
				held[r.Value] = place{sc.Partition, r.Offset}
				switch key := (tv{nt.topic, r.Value}); {
				case !attempted[key]:
					v.add(mx, "unexpected: %s holds %q at %s@%d, which no client appended", nt.node, r.Value, k, r.Offset)
				case !mayHappen[key]:
					v.add(mx, "unexpected: %s holds %q at %s@%d, whose append failed (%s)", nt.node, r.Value, k, r.Offset, failed[key])
				}
			}
			f, ok := first[k]
			if !ok {
				first[k] = firstScan{nt.node, sc.Records}
				continue
			}
			if len(f.recs) != len(sc.Records) {
				v.add(mx, "diverged: %s %s holds %d records, %s holds %d", k, f.node, len(f.recs), nt.node, len(sc.Records))
			}
			for i := range min(len(f.recs), len(sc.Records)) {
				a, b := f.recs[i], sc.Records[i]
				if a != b {
					v.add(mx, "diverged: %s %s holds %q at %d, %s holds %q at %d", k, f.node, a.Value, a.Offset, nt.node, b.Value, b.Offset)
					break
				}
			}
		}
		for _, op := range ackedList {
			if op.Topic != nt.topic {
				continue
			}
			g, ok := held[op.Value]
			switch {
			case !ok:
				v.add(mx, "lost: %s does not hold %q, acked at %s/%d@%d (%s)", nt.node, op.Value, op.Topic, op.Partition, op.Offset, op)
			case g.partition != op.Partition || g.offset != op.Offset:
				v.add(mx, "inconsistent: %q acked at %s/%d@%d, %s holds it at %s/%d@%d (%s)", op.Value, op.Topic, op.Partition, op.Offset, nt.node, op.Topic, g.partition, g.offset, op)
			}
		}
	}
	v.Note = fmt.Sprintf("records in %d node/topic scans", len(keys))
	return v
}
