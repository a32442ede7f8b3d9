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
				t.Errorf("lost: %q acked at %d/%d", a.Value, a.Partition, a.Offset)
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
