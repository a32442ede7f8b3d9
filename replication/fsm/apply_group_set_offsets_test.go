package fsm

import (
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
)

// TestGroupSetOffsetsApply applies the offsets of an externally
// coordinated group: a commit creates the group and logctl-style readers
// see it; a reset fences a commit formed before it; a commit outside any
// generation and a removal pass; live members of logd's protocol refuse.
// Replayed on a second state machine one entry at a time, the groups come
// out the same.
func TestGroupSetOffsetsApply(t *testing.T) {
	now := int64(1_700_000_000_000_000_000)
	sec := int64(time.Second)
	tp := func(p int32, off int64) group.OffsetCommit {
		return group.OffsetCommit{TopicPartition: group.TopicPartition{Topic: "orders", Partition: p}, Offset: off}
	}
	set := func(at int64, g string, fence int64, offs ...group.OffsetCommit) []byte {
		return EncodeGroupSetOffsets(at, GroupSetOffsets{Group: g, Fence: fence, Offsets: offs})
	}
	cmds := [][]byte{
		createCmd(t, "orders", 2, now),
		encodeAppend(now, Append{Topic: "orders", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, "a", "b", "c")}}}),
		set(now, "kafka", 0, tp(0, 2), tp(1, 0)),
		set(now, "kafka", 0, tp(0, 1)),             // backwards
		set(now, "kafka", 0, tp(0, 4)),             // above the end
		set(now, "kafka", 0, tp(2, 0)),             // no such partition
		set(now, "gone", group.NoFence, tp(0, -1)), // removal from a group that does not exist
		mustJSON(t, CmdGroupResetOffsets, now+sec, GroupResetOffsets{Group: "kafka", Offsets: []group.OffsetCommit{tp(0, 3)}}),
		set(now+sec, "kafka", 0, tp(0, 2)),              // fenced by the reset
		set(now+sec, "kafka", 1, tp(1, 0), tp(0, 3)),    // formed after it
		set(now+sec, "kafka", group.NoFence, tp(1, -1)), // removal
		mustJSON(t, CmdGroupJoin, now+sec, GroupJoin{Group: "mixed", Member: "m", Topics: []string{"orders"}, SessionTimeoutMs: 2000}),
		set(now+sec, "mixed", group.NoFence, tp(0, 1)),    // a logd member is live
		set(now+10*sec, "mixed", group.NoFence, tp(0, 1)), // its session ran out
	}
	want := []error{nil, nil, nil, nil, group.ErrOffsetAboveEnd, group.ErrInvalidGroupRequest, group.ErrConsumerGroupNotFound,
		nil, group.ErrStaleGeneration, nil, nil, nil, group.ErrUnknownMember, nil}
	f, fatals := testFSM(t, t.TempDir())
	for i, r := range f.ApplyBatch(entries(cmds...)) {
		err, _ := r.(error)
		if !errors.Is(err, want[i]) || (want[i] == nil && err != nil) {
			t.Fatalf("command %d: result %v, want %v", i, r, want[i])
		}
	}
	if len(*fatals) > 0 {
		t.Fatal(*fatals)
	}
	g, err := f.ConsumerGroup("kafka")
	if err != nil {
		t.Fatal(err)
	}
	if p := g.Topics["orders"].Partitions; p[0].Committed != 3 || p[1].Committed != -1 || g.Generation != 1 {
		t.Fatalf("kafka: generation %d, partitions %+v", g.Generation, p)
	}
	if gen, live, ok := f.GroupFence("kafka", now); gen != 1 || live != 0 || !ok {
		t.Fatalf("fence of kafka: %d %d %v", gen, live, ok)
	}
	if _, _, ok := f.GroupFence("gone", now); ok {
		t.Fatal("a removal created its group")
	}
	if _, live, _ := f.GroupFence("mixed", now+sec); live != 0 {
		t.Fatalf("mixed: %d live members after the commit that expired them", live)
	}

	f2, _ := testFSM(t, t.TempDir())
	for _, e := range entries(cmds...) {
		f2.apply(e)
	}
	if a, b := groupsJSON(t, f), groupsJSON(t, f2); a != b {
		t.Fatalf("replicas differ:\n%s\n%s", a, b)
	}
}

func TestGroupSetOffsetsCodec(t *testing.T) {
	c := GroupSetOffsets{Group: "g", Fence: group.NoFence, Offsets: []group.OffsetCommit{
		{TopicPartition: group.TopicPartition{Topic: "a", Partition: 0}, Offset: 5},
		{TopicPartition: group.TopicPartition{Topic: "a", Partition: 7}, Offset: -1},
		{TopicPartition: group.TopicPartition{Topic: "b", Partition: 1}, Offset: 1 << 40},
		{TopicPartition: group.TopicPartition{Topic: "a", Partition: 2}, Offset: 0},
	}}
	data := EncodeGroupSetOffsets(42, c)
	env, err := decodeCommandWith(sealEntry(data), &keyScratch{})
	if err != nil {
		t.Fatal(err)
	}
	if env.Type != CmdGroupSetOffsets || env.Time != 42 || !reflect.DeepEqual(env.Body, c) {
		t.Fatalf("decoded %+v", env)
	}
	if lvl, name, err := EntryLevel(data); err != nil || lvl != ExternalGroupsLevel || name != "group-set-offsets" {
		t.Fatalf("EntryLevel: %d %q %v", lvl, name, err)
	}
	payload := data[cmdHeaderSize:]
	for name, p := range map[string][]byte{
		"trailing":        append(append([]byte{}, payload...), 0),
		"truncated":       payload[:len(payload)-1],
		"huge topic run":  {1, 'g', 1, 0xff, 0xff, 0x03},
		"empty run":       {1, 'g', 1, 1, 1, 'a', 0},
		"partition > i32": {1, 'g', 1, 1, 1, 'a', 1, 0x80, 0x80, 0x80, 0x80, 0x08, 0},
	} {
		r := reader{b: p}
		decodeGroupSetOffsets(&r, commandVersion)
		if r.err == nil && len(r.b) == 0 {
			t.Errorf("%s: decoded", name)
		}
	}

	// With the ends of partitions hosted elsewhere: the next version,
	// at PlacedGroupsLevel; a version-1 entry does not read them.
	c.Ends = []PartitionEnd{{Topic: "a", Partition: 7, End: 12}, {Topic: "b", Partition: 1, End: 1 << 41}}
	data = EncodeGroupSetOffsets(43, c)
	env, err = decodeCommandWith(sealEntry(data), &keyScratch{})
	if err != nil || !reflect.DeepEqual(env.Body, c) {
		t.Fatalf("decoded %+v, %v", env, err)
	}
	if lvl, _, err := EntryLevel(data); err != nil || lvl != PlacedGroupsLevel {
		t.Fatalf("EntryLevel with ends: %d %v", lvl, err)
	}
	old := append([]byte{}, data...)
	old[1] = commandVersion
	if _, err := decodeCommandWith(sealEntry(old), &keyScratch{}); !errors.Is(err, backend.ErrBadCommand) {
		t.Fatalf("ends at version 1: %v", err)
	}
	payload = data[cmdHeaderSize:]
	for name, p := range map[string][]byte{
		"no ends":        append(append([]byte{}, EncodeGroupSetOffsets(1, GroupSetOffsets{Group: "g"})[cmdHeaderSize:]...), 0),
		"truncated ends": payload[:len(payload)-1],
		"huge end count": append(append([]byte{}, EncodeGroupSetOffsets(1, GroupSetOffsets{Group: "g"})[cmdHeaderSize:]...), 0xff, 0x01),
	} {
		r := reader{b: p}
		decodeGroupSetOffsets(&r, groupEndsVersion)
		if r.err == nil && len(r.b) == 0 {
			t.Errorf("%s: decoded", name)
		}
	}
}

// FuzzDecodeGroupSetOffsets: the decoder never panics, and what it
// accepts encodes to a payload that decodes to the same value and applies
// to an empty state without panicking.
func FuzzDecodeGroupSetOffsets(f *testing.F) {
	f.Add(EncodeGroupSetOffsets(1, GroupSetOffsets{Group: "g", Fence: 3, Offsets: []group.OffsetCommit{
		{TopicPartition: group.TopicPartition{Topic: "orders", Partition: 1}, Offset: 9}}})[cmdHeaderSize:])
	f.Add([]byte{1, 'g', 1, 0})
	f.Add([]byte{0, 0, 2, 1, 'a', 1, 0, 0, 1, 'b', 1, 1, 1})
	f.Add(append([]byte{0x80}, EncodeGroupSetOffsets(1, GroupSetOffsets{Group: "g", Fence: 3, Offsets: []group.OffsetCommit{
		{TopicPartition: group.TopicPartition{Topic: "orders", Partition: 1}, Offset: 9}}, Ends: []PartitionEnd{{Topic: "orders", Partition: 1, End: 10}}})[cmdHeaderSize:]...))
	f.Fuzz(func(t *testing.T, p []byte) {
		version := byte(commandVersion)
		if len(p) > 0 && p[0]&0x80 != 0 { // the first byte's top bit picks the version with ends
			version, p = groupEndsVersion, p[1:]
		}
		r := reader{b: p}
		c := decodeGroupSetOffsets(&r, version)
		if r.err != nil || len(r.b) != 0 {
			return
		}
		again := reader{b: EncodeGroupSetOffsets(1, c)[cmdHeaderSize:]}
		back := decodeGroupSetOffsets(&again, version)
		if again.err != nil || len(again.b) != 0 || !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip: %+v, %v; want %+v", back, again.err, c)
		}
		g := group.NewConsumerGroup("g")
		_ = g.SetOffsets(1, c.Fence, c.Offsets, noTopics{})
	})
}

// noTopics is a group.Topics without topics.
type noTopics struct{}

func (noTopics) Topic(string) (int32, uint64, bool) { return 0, 0, false }
func (noTopics) EndOffset(string, int32) int64      { return 0 }

// TestDryRunGroupBesideApplies: a proposer dry-runs a group command on its
// own goroutine while Raft's applies appends: the dry run reads no state
// that only the Raft goroutine may touch (the race detector checks), and
// judges offsets against the log's end.
func TestDryRunGroupBesideApplies(t *testing.T) {
	f, fatals := testFSM(t, t.TempDir())
	f.apply(Entry{Index: 1, Command: true, Data: createCmd(t, "orders", 1, 1)})
	tp := group.TopicPartition{Topic: "orders", Partition: 0}
	var wg sync.WaitGroup
	var done atomic.Bool
	wg.Go(func() {
		for !done.Load() {
			f.DryRunGroup(CmdGroupSetOffsets, "g", 1, GroupSetOffsets{Group: "g", Fence: group.NoFence, Offsets: []group.OffsetCommit{{TopicPartition: tp, Offset: 1}}})
		}
	})
	for i := range uint64(200) {
		f.apply(Entry{Index: 2 + i, Command: true, Data: encodeAppend(1, Append{Topic: "orders", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, "x")}}})})
	}
	done.Store(true)
	wg.Wait()
	if len(*fatals) > 0 {
		t.Fatal(*fatals)
	}
	if err, ok := f.DryRunGroup(CmdGroupSetOffsets, "g", 1, GroupSetOffsets{Group: "g", Fence: group.NoFence, Offsets: []group.OffsetCommit{{TopicPartition: tp, Offset: 201}}}).(error); !ok || !errors.Is(err, group.ErrOffsetAboveEnd) {
		t.Fatalf("a dry run past the end of 200 records: %v, want ErrOffsetAboveEnd", err)
	}
}
