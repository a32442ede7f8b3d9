package histcheck

import (
	"cmp"
	"fmt"
	"slices"
)

// CheckIdempotency checks keyed appends: every ok answer for one key
// (topic and idempotency key) names the same partition and offset, the
// first attempt's and every retry's alike; and no final scan holds a
// keyed value at two places (retries resend the same value, so a second
// copy is a second write).
func CheckIdempotency(ops []Op, opt Options) Verdict {
	v := Verdict{Checker: "idempotency"}
	mx := opt.maxViolations()
	type topicKey struct{ topic, key string }
	first := map[topicKey]*Op{}
	keyOf := map[[2]string]string{} // (topic, value) -> key
	var keys []topicKey
	for i := range ops {
		op := &ops[i]
		if op.Kind != Append || op.Key == "" {
			continue
		}
		keyOf[[2]string{op.Topic, op.Value}] = op.Key
		if op.Outcome != OK {
			continue
		}
		v.Checked++
		tk := topicKey{op.Topic, op.Key}
		f := first[tk]
		if f == nil {
			first[tk] = op
			keys = append(keys, tk)
			continue
		}
		if f.Partition != op.Partition || f.Offset != op.Offset {
			v.add(mx, "key %q of %s answered at %d@%d by %s but at %d@%d by %s", op.Key, op.Topic, f.Partition, f.Offset, f, op.Partition, op.Offset, op)
		}
	}
	type nodeTopic struct{ node, topic string }
	held := map[nodeTopic]map[string][]string{} // value -> places
	var nts []nodeTopic
	for i := range ops {
		op := &ops[i]
		if op.Kind != Scan || op.Outcome != OK {
			continue
		}
		nt := nodeTopic{op.Node, op.Topic}
		if held[nt] == nil {
			held[nt] = map[string][]string{}
			nts = append(nts, nt)
		}
		for _, r := range op.Records {
			if _, keyed := keyOf[[2]string{op.Topic, r.Value}]; keyed {
				held[nt][r.Value] = append(held[nt][r.Value], fmt.Sprintf("%d@%d", op.Partition, r.Offset))
			}
		}
	}
	slices.SortFunc(nts, func(a, b nodeTopic) int { return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.node, b.node)) })
	for _, nt := range nts {
		vals := make([]string, 0, len(held[nt]))
		for val, places := range held[nt] {
			if len(places) > 1 {
				vals = append(vals, val)
			}
		}
		slices.Sort(vals)
		for _, val := range vals {
			v.add(mx, "key %q of %s written twice: %s holds %q at %v", keyOf[[2]string{nt.topic, val}], nt.topic, nt.node, val, held[nt][val])
		}
	}
	v.Note = fmt.Sprintf("ok keyed appends of %d keys", len(keys))
	return v
}
