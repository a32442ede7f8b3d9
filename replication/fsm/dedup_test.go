package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/dedup"
)

func keyed(p int32, b []byte, keys ...string) PartitionBatch {
	pb := PartitionBatch{Partition: p, Batch: b}
	for i, k := range keys {
		if k != "" {
			pb.Keys = append(pb.Keys, RecordKey{Index: int32(i), Key: k, Digest: dedup.Digest{byte(i), 1}})
		}
	}
	return pb
}

// TestAppendIdempotencyKeys: keys are recorded with their offsets; an
// entry carrying a key committed before it appends nothing; a key is
// forgotten exactly at the end of its window; replay after a restart and a
// snapshot restore rebuild the same window.
func TestAppendIdempotencyKeys(t *testing.T) {
	dir := t.TempDir()
	now := int64(1_700_000_000_000_000_000)
	window := int64(time.Hour)
	create := mustJSON(t, CmdCreateTopic, now, CreateTopic{Name: "k", Partitions: 2, Config: map[string]string{ConfigIdempotencyWindowMs: "3600000"}})
	cmds := [][]byte{
		create,
		encodeAppend(now, Append{Topic: "k", Batches: []PartitionBatch{keyed(0, mustBatch(t, "a", "b", "c"), "ka", "", "kc")}}),
		encodeAppend(now+1, Append{Topic: "k", Batches: []PartitionBatch{keyed(1, mustBatch(t, "x"), "kx"), keyed(0, mustBatch(t, "a2"), "ka")}}), // race on ka
		encodeAppend(now+window-1, Append{Topic: "k", Batches: []PartitionBatch{keyed(1, mustBatch(t, "late"), "kc")}}),                           // kc still held
		encodeAppend(now+window, Append{Topic: "k", Batches: []PartitionBatch{keyed(1, mustBatch(t, "again"), "ka")}}),                            // ka expired
	}
	f, fatals := testFSM(t, dir)
	res := f.ApplyBatch(entries(cmds...))
	for i, want := range []error{nil, nil, backend.ErrDedupRace, backend.ErrDedupRace, nil} {
		err, _ := res[i].(error)
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Fatalf("entry %d: %v, want %v", i+1, res[i], want)
		}
	}
	if got := readAll(t, f, "k", 0); fmt.Sprint(got) != "[a b c]" {
		t.Fatalf("partition 0 = %v", got)
	}
	if got := readAll(t, f, "k", 1); fmt.Sprint(got) != "[again]" {
		t.Fatalf("partition 1 = %v (a refused entry appended)", got)
	}
	tp, _ := f.Topic("k")
	wantKeys := fmt.Sprint(tp.Dedup().Keys())
	// kc (added at now) left the window when entry 5 applied at now+window.
	if _, ok := tp.Dedup().Lookup("kc", now+window-1); ok {
		t.Fatal("kc still held after its window ended")
	}
	if e, ok := tp.Dedup().Lookup("ka", now+window); !ok || e.Partition != 1 || e.Offset != 0 {
		t.Fatalf("re-added ka = %+v %v", e, ok)
	}

	// Snapshot after entry 2, restore into a new FSM over the same files,
	// replay the rest: same window, same data.
	f.Close()
	f2, _ := testFSM(t, dir)
	f2.ApplyBatch(entries(cmds[:2]...))
	snap, err := f2.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := persist(t, snap)
	// The size of the windows written raises the by-size snapshot trigger.
	var sections int64
	for _, tm := range snap.m.Topics {
		sections += tm.DedupBytes
	}
	if got := f2.windowBytes.Load(); sections == 0 || got != sections {
		t.Fatalf("FSM noted %d bytes of windows; the snapshot wrote %d", got, sections)
	}
	f2.Close()
	f3, _ := testFSM(t, dir)
	if err := f3.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	tp3, _ := f3.Topic("k")
	snapKeys := fmt.Sprint(tp3.Dedup().Keys())
	if tp3.Dedup().Stats().Keys != 2 { // ka and kc; kx and ka's retry raced
		t.Fatalf("restored window %s", snapKeys)
	}
	rest := entries(cmds...)[2:]
	res = f3.ApplyBatch(rest)
	if err, _ := res[0].(error); !errors.Is(err, backend.ErrDedupRace) {
		t.Fatalf("replayed race entry: %v", res[0])
	}
	if got := fmt.Sprint(tp3.Dedup().Keys()); got != wantKeys {
		t.Fatalf("window after restore and replay:\n got %s\nwant %s", got, wantKeys)
	}
	if got := readAll(t, f3, "k", 1); fmt.Sprint(got) != "[again]" {
		t.Fatalf("partition 1 after replay = %v", got)
	}
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}

	// A version 1 snapshot (the window base64 inside the manifest) restores
	// the same window; a version 2 snapshot cut inside its window section
	// is refused.
	v1 := *snap
	v1.m.Version = 1
	v1.m.Topics = append([]topicManifest(nil), v1.m.Topics...)
	for i := range v1.m.Topics {
		var section bytes.Buffer
		if _, err := v1.dedups[i].WriteTo(&section); err != nil {
			t.Fatal(err)
		}
		v1.m.Topics[i].Dedup, v1.m.Topics[i].DedupBytes = section.Bytes(), 0
	}
	v1.dedups = nil
	var b1 bytes.Buffer
	if err := v1.writeTo(&b1); err != nil {
		t.Fatal(err)
	}
	f3.Close()
	damaged := slices.Clone(sink.Bytes())
	damaged[bytes.IndexByte(damaged, '\n')+1] = 0xff // the first window's encoding version
	for _, tc := range []struct {
		name    string
		data    []byte
		wantErr bool
	}{
		{"version 1", b1.Bytes(), false},
		{"version 2 cut short", sink.Bytes()[:sink.Len()-1], true},
		{"version 2 window damaged", damaged, true},
	} {
		f4, _ := testFSM(t, dir)
		err := f4.Restore(io.NopCloser(bytes.NewReader(tc.data)))
		if tc.wantErr {
			if err == nil {
				t.Fatalf("%s: restored", tc.name)
			}
			// Refused whole before anything changed: a state machine
			// restored from the good snapshot keeps serving it.
			if err := f4.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
				t.Fatal(err)
			}
			if err := f4.Restore(io.NopCloser(bytes.NewReader(tc.data))); err == nil {
				t.Fatalf("%s: restored over a restored state", tc.name)
			}
			tp4, err := f4.Topic("k")
			if err != nil {
				t.Fatalf("%s: after the refused restore: %v", tc.name, err)
			}
			if got := fmt.Sprint(tp4.Dedup().Keys()); got != snapKeys {
				t.Fatalf("%s: after the refused restore: window %s, want %s", tc.name, got, snapKeys)
			}
			f4.Close()
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		tp4, _ := f4.Topic("k")
		if got := fmt.Sprint(tp4.Dedup().Keys()); got != snapKeys {
			t.Fatalf("%s: window %s, want %s", tc.name, got, snapKeys)
		}
		f4.Close()
	}
}

// persist writes a snapshot as Raft would and tells the FSM it is durable.
func persist(t *testing.T, s *Snapshot) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	if err := s.Persist(&b); err != nil {
		t.Fatal(err)
	}
	s.Durable()
	return &b
}

func TestAppendKeysCodec(t *testing.T) {
	digest := func(i int) dedup.Digest { return dedup.Digest{byte(i), 0xab, 15: byte(i)} }
	a := Append{Topic: "t", Batches: []PartitionBatch{
		keyed(3, []byte("batch-bytes"), "", "k1"),
		{Partition: 1, Batch: []byte("b2")},
		// Shared prefixes, a key that is a prefix of the one before, an
		// empty-suffix repeat, a key sharing nothing, indexes out of order.
		{Partition: 2, Batch: []byte("b3"), Keys: []RecordKey{
			{Index: 0, Key: "order-2026-11-29-000017", Digest: digest(0)},
			{Index: 1, Key: "order-2026-11-29-000018", Digest: digest(1)},
			{Index: 4, Key: "order-2026", Digest: digest(2)},
			{Index: 2, Key: "order-2026", Digest: digest(3)},
			{Index: 9, Key: "x", Digest: digest(4)},
		}},
	}}
	enc := encodeAppend(42, a)
	env, err := decodeCommandWith(enc, &keyScratch{})
	if err != nil {
		t.Fatal(err)
	}
	if got := env.Body.(Append); fmt.Sprint(got) != fmt.Sprint(a) || env.Time != 42 || enc[1] != appendKeysVersionV3 {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, a)
	}
	// The state machine decodes into reused scratch, whose buffer has room
	// for all the keys from the second decode on: one batch's keys must not
	// overwrite another's.
	scratch := &keyScratch{}
	for i := range 3 {
		env, err := decodeCommandWith(enc, scratch)
		if err != nil {
			t.Fatal(err)
		}
		if got := env.Body.(Append); fmt.Sprint(got) != fmt.Sprint(a) {
			t.Fatalf("decode %d into reused scratch:\n got %+v\nwant %+v", i, got, a)
		}
	}
	// Version 2, written by older builds, still decodes.
	v2, err := decodeCommandWith(encodeAppendV2(42, a), &keyScratch{})
	if err != nil {
		t.Fatal(err)
	}
	if got := v2.Body.(Append); fmt.Sprint(got) != fmt.Sprint(a) {
		t.Fatalf("version 2:\n got %+v\nwant %+v", got, a)
	}
	// Truncating a keyed command anywhere is an error, never a panic.
	for i := cmdHeaderSize; i < len(enc); i++ {
		if _, err := decodeCommandWith(enc[:i], &keyScratch{}); err == nil {
			t.Fatalf("truncated at %d decoded", i)
		}
	}
}

// encodeAppendV2 is the version 2 encoding older builds wrote: keys whole.
func encodeAppendV2(now int64, a Append) []byte {
	dst := encodeHeader(nil, CmdAppend, now)
	dst[1] = appendKeysVersion
	dst = binary.AppendUvarint(dst, uint64(len(a.Topic)))
	dst = append(dst, a.Topic...)
	dst = binary.AppendUvarint(dst, uint64(len(a.Batches)))
	for _, b := range a.Batches {
		dst = binary.AppendUvarint(dst, uint64(uint32(b.Partition)))
		dst = binary.AppendUvarint(dst, uint64(len(b.Batch)))
		dst = append(dst, b.Batch...)
		dst = binary.AppendUvarint(dst, uint64(len(b.Keys)))
		for _, k := range b.Keys {
			dst = binary.AppendUvarint(dst, uint64(uint32(k.Index)))
			dst = binary.AppendUvarint(dst, uint64(len(k.Key)))
			dst = append(dst, k.Key...)
			dst = append(dst, k.Digest[:]...)
		}
	}
	return dst
}

// FuzzDecodeAppend: any bytes decode to an error or to an Append that
// encodes and decodes back to itself; nothing panics.
func FuzzDecodeAppend(f *testing.F) {
	a := Append{Topic: "t", Batches: []PartitionBatch{keyed(0, []byte("xy"), "order-1", "order-2", "", "other")}}
	f.Add(encodeAppend(1, a))
	f.Add(encodeAppendV2(1, a))
	f.Add(sealEntry(encodeAppend(1, a)))
	f.Add(encodeAppend(1, Append{Topic: "t", Batches: []PartitionBatch{{Partition: 1, Batch: []byte("z")}}}))
	scratch := &keyScratch{}
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := decodeCommandWith(data, &keyScratch{})
		if err != nil {
			return
		}
		got, ok := env.Body.(Append)
		if !ok {
			return
		}
		again, err := decodeCommandWith(encodeAppend(env.Time, got), &keyScratch{})
		if err != nil {
			t.Fatalf("re-encoded append does not decode: %v", err)
		}
		if fmt.Sprint(again.Body) != fmt.Sprint(got) {
			t.Fatalf("round trip changed the append:\n%+v\n%+v", got, again.Body)
		}
		// The state machine decodes into reused scratch: the same input
		// must decode the same, into scratch that held other keys.
		for range 2 {
			env, err := decodeCommandWith(data, scratch)
			if err != nil {
				t.Fatalf("decodes without scratch but not with: %v", err)
			}
			if fmt.Sprint(env.Body) != fmt.Sprint(got) {
				t.Fatalf("decoding into scratch changed the append:\n%+v\n%+v", got, env.Body)
			}
		}
	})
}

// TestAlterIdempotencyMaxKeys: lowering idempotency.max.keys bounds the
// live window from the next keyed append on, as a replica restored from a
// snapshot (which reads the bound from the config) would.
func TestAlterIdempotencyMaxKeys(t *testing.T) {
	now := int64(1_700_000_000_000_000_000)
	f, fatals := testFSM(t, t.TempDir())
	res := f.ApplyBatch(entries(
		mustJSON(t, CmdCreateTopic, now, CreateTopic{Name: "k", Partitions: 1}),
		encodeAppend(now, Append{Topic: "k", Batches: []PartitionBatch{keyed(0, mustBatch(t, "a", "b", "c", "d"), "ka", "kb", "kc", "kd")}}),
		mustJSON(t, CmdAlterTopic, now, AlterTopic{Name: "k", Config: map[string]string{ConfigIdempotencyMaxKeys: "2"}}),
		encodeAppend(now, Append{Topic: "k", Batches: []PartitionBatch{keyed(0, mustBatch(t, "e"), "ke")}}),
	))
	for i, r := range res {
		if err, ok := r.(error); ok {
			t.Fatalf("entry %d: %v", i+1, err)
		}
	}
	tp, _ := f.Topic("k")
	if st := tp.Dedup().Stats(); st.Keys != 2 || st.Evicted != 3 {
		t.Fatalf("window after lowering the bound to 2: %+v", st)
	}
	for key, held := range map[string]bool{"kc": false, "kd": true, "ke": true} {
		if _, ok := tp.Dedup().Lookup(key, now); ok != held {
			t.Errorf("%s held = %v, want %v", key, ok, held)
		}
	}
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}
}
