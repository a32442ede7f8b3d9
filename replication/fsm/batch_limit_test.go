package fsm

import (
	"errors"
	"strings"
	"testing"

	"github.com/logd-dev/logd/backend"
)

// TestAppendPastMaxMessageBytes: a batch larger than the topic's
// max.message.bytes (records within it each, but not together) is refused
// with backend.ErrRecordTooLarge, by the proposer's check and by Apply, and the
// node does not stop; once max.message.bytes is raised, such a batch is
// appended, on the logs opened before the change too.
func TestAppendPastMaxMessageBytes(t *testing.T) {
	now := int64(1_700_000_000_000_000_000)
	f, fatals := testFSM(t, t.TempDir())
	create, err := EncodeCreateTopic(now, CreateTopic{Name: "t", Partitions: 1, Config: map[string]string{ConfigMaxMessageBytes: "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if res := f.apply(Entry{Index: 1, Command: true, Data: create}); res != nil {
		if err, ok := res.(error); ok {
			t.Fatal(err)
		}
	}
	big := Append{Topic: "t", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, strings.Repeat("a", 600), strings.Repeat("b", 600))}}}
	topic, err := f.Topic("t")
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateAppend(topic, big); !errors.Is(err, backend.ErrRecordTooLarge) {
		t.Fatalf("proposer's check: %v, want backend.ErrRecordTooLarge", err)
	}
	res := f.apply(Entry{Index: 2, Command: true, Data: encodeAppend(now, big)})
	if err, _ := res.(error); !errors.Is(err, backend.ErrRecordTooLarge) {
		t.Fatalf("apply: %v, want backend.ErrRecordTooLarge", res)
	}
	if len(*fatals) > 0 {
		t.Fatalf("the node stopped: %v", *fatals)
	}
	res = f.apply(Entry{Index: 3, Command: true, Data: mustJSON(t, CmdAlterTopic, now, AlterTopic{Name: "t", Config: map[string]string{ConfigMaxMessageBytes: "4000"}})})
	if err, ok := res.(error); ok {
		t.Fatal(err)
	}
	res = f.apply(Entry{Index: 4, Command: true, Data: encodeAppend(now, big)})
	if err, ok := res.(error); ok {
		t.Fatalf("after raising max.message.bytes: %v", err)
	}
	if len(*fatals) > 0 {
		t.Fatalf("the node stopped: %v", *fatals)
	}
	if got := readAll(t, f, "t", 0); len(got) != 2 {
		t.Fatalf("read %d records, want 2", len(got))
	}
}
