package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
)

// Ack is one acknowledged record.
type Ack struct {
	Partition int32
	Offset    int64
	Value     string
}

// Check applies the fault tests' rules to what one node holds: every
// acknowledged record at its offset; offsets dense from 0; no value twice;
// nothing that was never attempted.
func Check(t testing.TB, got map[int32][]*logdv1.FetchedRecord, acks []Ack, attempted map[string]bool) {
	t.Helper()
	byValue := map[string]Ack{}
	for part, recs := range got {
		for i, r := range recs {
			if r.Offset != int64(i) {
				t.Errorf("partition %d: record %d has offset %d (offsets must be dense from 0)", part, i, r.Offset)
			}
			v := string(r.Value)
			if prev, dup := byValue[v]; dup {
				t.Errorf("duplicate: %q at %d/%d and %d/%d", v, prev.Partition, prev.Offset, part, r.Offset)
			}
			byValue[v] = Ack{part, r.Offset, v}
			if !attempted[v] {
				t.Errorf("unexpected: %q at %d/%d was never sent", v, part, r.Offset)
			}
		}
	}
	lost := 0
	for _, a := range acks {
		g, ok := byValue[a.Value]
		if !ok {
			lost++
			if lost < 10 {
				t.Errorf("lost: %q acked at %d/%d; %s", a.Value, a.Partition, a.Offset, heldAt(got[a.Partition], a.Offset))
			}
			continue
		}
		if g.Partition != a.Partition || g.Offset != a.Offset {
			t.Errorf("inconsistent: %q acked at %d/%d, read at %d/%d", a.Value, a.Partition, a.Offset, g.Partition, g.Offset)
		}
	}
	if lost > 0 {
		t.Errorf("%d acknowledged records lost", lost)
	}
}

// heldAt says what a node's records of one partition hold at offset: the
// record there, or where they end before it.
func heldAt(recs []*logdv1.FetchedRecord, offset int64) string {
	for _, r := range recs {
		if r.Offset == offset {
			return fmt.Sprintf("this node holds %q there", r.Value)
		}
	}
	if n := len(recs); n == 0 || recs[n-1].Offset < offset {
		return fmt.Sprintf("this node's partition holds %d records, ending before it", n)
	}
	return "this node's partition has no record at that offset"
}

// Render prints a topic's records, partition by partition, for comparing
// two reads.
func Render(m map[int32][]*logdv1.FetchedRecord) string {
	var parts []string
	for p, recs := range m {
		var b strings.Builder
		fmt.Fprintf(&b, "%d:", p)
		for _, r := range recs {
			fmt.Fprintf(&b, " %d=%s", r.Offset, r.Value)
		}
		parts = append(parts, b.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, "\n")
}

// ReasonOf returns the ErrorInfo reason of a Connect error, or
// REASON_UNSPECIFIED when it carries none.
func ReasonOf(ce *connect.Error) logdv1.Reason {
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if info, ok := v.(*logdv1.ErrorInfo); ok {
				return info.Reason
			}
		}
	}
	return logdv1.Reason_REASON_UNSPECIFIED
}

// Differences describes where two nodes' copies of a topic differ: for each
// partition they do not agree on, how many records each holds and, around
// the first offset where they differ, what each holds there (offset, key,
// value), so a loss reads as a hole, a shorter log or another record in
// its place.
func Differences(aID string, a map[int32][]*logdv1.FetchedRecord, bID string, b map[int32][]*logdv1.FetchedRecord) string {
	parts := map[int32]bool{}
	for p := range a {
		parts[p] = true
	}
	for p := range b {
		parts[p] = true
	}
	var sorted []int32
	for p := range parts {
		sorted = append(sorted, p)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	const window = 4
	var out strings.Builder
	for _, p := range sorted {
		ra, rb := a[p], b[p]
		diff := -1
		for i := 0; i < max(len(ra), len(rb)); i++ {
			if i >= len(ra) || i >= len(rb) || ra[i].Offset != rb[i].Offset || string(ra[i].Value) != string(rb[i].Value) {
				diff = i
				break
			}
		}
		if diff < 0 {
			continue
		}
		fmt.Fprintf(&out, "partition %d: %s holds %d records, %s holds %d; first difference at record %d\n", p, aID, len(ra), bID, len(rb), diff)
		for _, side := range []struct {
			id   string
			recs []*logdv1.FetchedRecord
		}{{aID, ra}, {bID, rb}} {
			fmt.Fprintf(&out, "  %s:", side.id)
			for i := max(0, diff-window); i < min(len(side.recs), diff+window+1); i++ {
				r := side.recs[i]
				fmt.Fprintf(&out, " %d=%s/%s", r.Offset, r.Key, r.Value)
			}
			out.WriteString("\n")
		}
	}
	return out.String()
}
