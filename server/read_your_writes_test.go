package server

import (
	"maps"
	"testing"

	"github.com/logd-dev/logd/backend"
)

// TestWrittenHeader: the answer to a forwarded produce to a placed topic
// says each partition's end after the call's records, for the topic's
// incarnation, the topic's name escaped; a value that does not parse is
// refused (and so ignored by the forwarding node).
func TestWrittenHeader(t *testing.T) {
	res := backend.ProduceResult{Incarnation: 42, Results: []backend.RecordResult{
		{Partition: 0, Offset: 16}, {Partition: 3, Offset: 8}, {Partition: 0, Offset: 15}, {Partition: 3, Offset: 2, Duplicate: true},
	}}
	v := encodeWritten("orders;eu=1", res)
	topic, inc, ends, ok := decodeWritten(v)
	if !ok || topic != "orders;eu=1" || inc != 42 || !maps.Equal(ends, map[int32]int64{0: 17, 3: 9}) {
		t.Fatalf("decode %q: %q, %d, %v, %v", v, topic, inc, ends, ok)
	}
	for _, bad := range []string{"", "orders;42", "orders;x;0=1", "orders;42;0", "orders;42;-1=3", "orders;42;0=-2", "%zz;42;0=1", "orders;42;0=1;x"} {
		if _, _, _, ok := decodeWritten(bad); ok {
			t.Errorf("decodeWritten(%q) parsed", bad)
		}
	}
}

// TestGroupsAppliedHeader: the groups a forwarded call wrote to round
// trip through GroupsAppliedHeader in order; a value that does not parse
// is refused (and so ignored by the forwarding node).
func TestGroupsAppliedHeader(t *testing.T) {
	groups := map[uint64]uint64{5: 77, 3: 120}
	v := encodeGroupsApplied(groups)
	if v != "3=120,5=77" {
		t.Fatalf("encode: %q", v)
	}
	if got, ok := decodeGroupsApplied(v); !ok || !maps.Equal(got, groups) {
		t.Fatalf("decode %q: %v, %v", v, got, ok)
	}
	if v := encodeGroupsApplied(nil); v != "" {
		t.Errorf("no groups: %q", v)
	}
	for _, bad := range []string{"3", "3=", "=5", "0=5", "x=1", "3=-1", "3=1,", "3=1;5=2"} {
		if _, ok := decodeGroupsApplied(bad); ok {
			t.Errorf("decodeGroupsApplied(%q) parsed", bad)
		}
	}
}
