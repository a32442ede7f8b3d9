package fsm

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/queue"
)

// TestEntryChecksum: a sealed entry decodes as the command it was; a flip
// of any bit of it (but the seal's own flag) is backend.ErrEntryDamaged, never a
// different command; entries from builds before the seal decode as before.
func TestEntryChecksum(t *testing.T) {
	now := int64(1_700_000_000_000_000_000)
	queueAck, err := encodeQueueCommand(CmdQueueAck, now, QueueAck{Topic: "q", Group: "workers", Tokens: []queue.Token{{Partition: 2, Offset: 41, Delivery: 3, Tag: 0xfeed}}})
	if err != nil {
		t.Fatal(err)
	}
	commands := map[string][]byte{
		"create-topic": mustJSON(t, CmdCreateTopic, now, CreateTopic{Name: "orders", Partitions: 3}),
		"group-commit": mustJSON(t, CmdGroupCommit, now, GroupCommit{Group: "billing", Member: "m-1", Generation: 4,
			Offsets: []group.OffsetCommit{{TopicPartition: group.TopicPartition{Topic: "orders", Partition: 1}, Offset: 1234}}}),
		"keyed-append": encodeAppend(now, Append{Topic: "orders", Batches: []PartitionBatch{
			keyed(0, mustBatch(t, "a", "b"), "order-17", "order-18"), {Partition: 2, Batch: mustBatch(t, "c")}}}),
		"queue-ack": queueAck,
	}
	for name, plain := range commands {
		t.Run(name, func(t *testing.T) {
			want, err := decodeCommandWith(plain, &keyScratch{}) // an entry as older builds wrote it
			if err != nil {
				t.Fatal(err)
			}
			sealed := sealEntry(append([]byte(nil), plain...))
			if len(sealed) != len(plain)+entryChecksumSize || sealed[1]&entryChecksumFlag == 0 {
				t.Fatalf("sealed entry: %d bytes, version byte %#x", len(sealed), sealed[1])
			}
			got, err := decodeCommandWith(sealed, &keyScratch{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("sealed entry decodes as\n%+v\nwant\n%+v", show(got), show(want))
			}
			damaged := make([]byte, len(sealed))
			for i := range sealed {
				for bit := range 8 {
					copy(damaged, sealed)
					damaged[i] ^= 1 << bit
					got, err := decodeCommandWith(damaged, &keyScratch{})
					if i == 1 && 1<<bit == entryChecksumFlag {
						// The flag cleared: the entry reads as unsealed, its
						// checksum as trailing bytes. An error or the same
						// command; never another one.
						if err == nil && !reflect.DeepEqual(got, want) {
							t.Fatalf("flag cleared: decodes as\n%+v", show(got))
						}
						continue
					}
					if !errors.Is(err, backend.ErrEntryDamaged) {
						t.Fatalf("bit %d of byte %d flipped: %v, decoded %+v", bit, i, err, show(got))
					}
				}
			}
			for n := range len(sealed) {
				if _, err := decodeCommandWith(sealed[:n], &keyScratch{}); err == nil {
					t.Fatalf("sealed entry cut to %d bytes decodes", n)
				}
			}
		})
	}
}

// show renders a decoded command with its body, not the body's address.
func show(e envelope) string {
	return fmt.Sprintf("%s@%d %+v", e.Type, e.Time, reflect.Indirect(reflect.ValueOf(e.Body)))
}

// TestApplyDamagedEntryStops: a sealed entry damaged on this node stops
// the state machine before anything of it is applied. Unsealed, the same
// damage (a topic name) made this node alone refuse an append every other
// replica made.
func TestApplyDamagedEntryStops(t *testing.T) {
	now := time.Now().UnixNano()
	f, fatals := testFSM(t, t.TempDir())
	create := sealEntry(mustJSON(t, CmdCreateTopic, now, CreateTopic{Name: "orders", Partitions: 1}))
	app := sealEntry(encodeAppend(now, Append{Topic: "orders", Batches: []PartitionBatch{keyed(0, mustBatch(t, "a"), "order-17")}}))
	if res := f.ApplyBatch(entries(create, app)); fmt.Sprint(res[1]) != fmt.Sprint(AppendResult{BaseOffsets: []int64{0}}) {
		t.Fatalf("results %v", res)
	}
	// The same append again, its topic name damaged ("orders" → "ordess").
	damaged := sealEntry(encodeAppend(now, Append{Topic: "orders", Batches: []PartitionBatch{keyed(0, mustBatch(t, "b"), "order-18")}}))
	at := cmdHeaderSize + 1 + len("orde")
	if damaged[at] != 'r' {
		t.Fatalf("byte %d is %q", at, damaged[at])
	}
	damaged[at] = 's'
	res := f.ApplyBatch([]Entry{{Index: 3, Command: true, Data: damaged}})
	if err, _ := res[0].(error); !errors.Is(err, backend.ErrStopped) {
		t.Fatalf("damaged entry: %v", res[0])
	}
	if len(*fatals) != 1 || !errors.Is((*fatals)[0], backend.ErrEntryDamaged) || !errors.Is(f.Failed(), backend.ErrEntryDamaged) {
		t.Fatalf("fatal errors %v, failed %v", *fatals, f.Failed())
	}
	if got := readAll(t, f, "orders", 0); fmt.Sprint(got) != "[a]" {
		t.Fatalf("orders holds %v after the damaged entry", got)
	}
	if tp, _ := f.Topic("orders"); tp.Dedup().Stats().Keys != 1 {
		t.Fatalf("window after the damaged entry: %+v", tp.Dedup().Stats())
	}
}
