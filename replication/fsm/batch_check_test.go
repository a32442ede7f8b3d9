package fsm

import (
	"errors"
	"strings"
	"testing"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
)

// TestValidateVerifiedAppend: the proposer's check of batches whose CRCs
// were verified (ValidateVerifiedAppend) refuses everything the full check
// refuses but a bad CRC, and Apply refuses a batch with a bad CRC whatever
// the proposer checked: typed (backend.ErrInvalidArgument and
// *batch.CRCError), nothing written, the node running on.
func TestValidateVerifiedAppend(t *testing.T) {
	now := int64(1_700_000_000_000_000_000)
	f, fatals := testFSM(t, t.TempDir())
	create, err := EncodeCreateTopic(now, CreateTopic{Name: "t", Partitions: 2, Config: map[string]string{ConfigMaxMessageBytes: "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if res, ok := f.apply(Entry{Index: 1, Command: true, Data: create}).(error); ok {
		t.Fatal(res)
	}
	topic, err := f.Topic("t")
	if err != nil {
		t.Fatal(err)
	}
	good := mustBatch(t, "a", "b")
	damaged := append([]byte(nil), good...)
	damaged[len(damaged)-2] ^= 0x10 // a value byte: the CRC no longer holds
	one := func(p int32, b []byte) Append {
		return Append{Topic: "t", Batches: []PartitionBatch{{Partition: p, Batch: b}}}
	}
	tests := []struct {
		name string
		a    Append
		// full and verified: the error each check wraps (nil: accepted).
		full, verified error
	}{
		{name: "good", a: one(0, good)},
		{name: "damaged", a: one(0, damaged), full: backend.ErrInvalidArgument},
		{name: "cut short", a: one(0, good[:len(good)-1]), full: backend.ErrInvalidArgument, verified: backend.ErrInvalidArgument},
		{name: "bytes after the batch", a: one(0, append(append([]byte(nil), good...), 0)), full: backend.ErrInvalidArgument, verified: backend.ErrInvalidArgument},
		{name: "not a batch", a: one(0, []byte("hello")), full: backend.ErrInvalidArgument, verified: backend.ErrInvalidArgument},
		{name: "unknown partition", a: one(5, good), full: backend.ErrUnknownPartition, verified: backend.ErrUnknownPartition},
		{name: "too large", a: one(0, mustBatch(t, strings.Repeat("x", 1200))), full: backend.ErrRecordTooLarge, verified: backend.ErrRecordTooLarge},
		{name: "no batches", a: Append{Topic: "t"}, full: backend.ErrInvalidArgument, verified: backend.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range []struct {
				name  string
				check func(*Topic, Append) error
				want  error
			}{{"ValidateAppend", ValidateAppend, tt.full}, {"ValidateVerifiedAppend", ValidateVerifiedAppend, tt.verified}} {
				err := c.check(topic, tt.a)
				if (err == nil) != (c.want == nil) || c.want != nil && !errors.Is(err, c.want) {
					t.Errorf("%s: %v, want %v", c.name, err, c.want)
				}
			}
		})
	}
	var crcErr *batch.CRCError
	if err := ValidateAppend(topic, one(0, damaged)); !errors.As(err, &crcErr) {
		t.Errorf("ValidateAppend of a damaged batch: %v, want a *batch.CRCError in its chain", err)
	}
	// A damaged batch that reached Apply (its proposer trusted a check
	// made before the damage) is refused there, before anything is
	// written: a good batch of the same entry is not written either.
	both := Append{Topic: "t", Batches: []PartitionBatch{{Partition: 1, Batch: good}, {Partition: 0, Batch: damaged}}}
	res := f.apply(Entry{Index: 2, Command: true, Data: encodeAppend(now, both)})
	if err, _ := res.(error); !errors.Is(err, backend.ErrInvalidArgument) || !errors.As(err, &crcErr) {
		t.Fatalf("apply of a damaged batch: %v, want backend.ErrInvalidArgument and *batch.CRCError", res)
	}
	if len(*fatals) > 0 {
		t.Fatalf("the node stopped: %v", *fatals)
	}
	for p := range int32(2) {
		if got := readAll(t, f, "t", p); len(got) != 0 {
			t.Fatalf("t-%d holds %q after a refused append", p, got)
		}
	}
	if res, ok := f.apply(Entry{Index: 3, Command: true, Data: encodeAppend(now, one(0, good))}).(error); ok {
		t.Fatalf("a good append after the refusal: %v", res)
	}
}
