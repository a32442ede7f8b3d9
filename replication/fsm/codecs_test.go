package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/log"
)

// compress returns b with its records compressed by c.
func compress(t testing.TB, b []byte, c batch.Compression) []byte {
	t.Helper()
	out, err := batch.Compress(b, c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// legacyAppend encodes an append as a build before CompressionLevel wrote
// it: payload version 1 whatever its batches' codecs (those builds
// appended snappy, lz4 and zstd batches from the Kafka front end in it).
func legacyAppend(now int64, a Append) []byte {
	dst := encodeHeader(nil, CmdAppend, now)
	dst = binary.AppendUvarint(dst, uint64(len(a.Topic)))
	dst = append(dst, a.Topic...)
	dst = binary.AppendUvarint(dst, uint64(len(a.Batches)))
	for _, b := range a.Batches {
		dst = binary.AppendUvarint(dst, uint64(uint32(b.Partition)))
		dst = binary.AppendUvarint(dst, uint64(len(b.Batch)))
		dst = append(dst, b.Batch...)
	}
	return dst
}

// TestAppendCodecVersion: an append that carries a snappy, lz4 or zstd
// batch is written in payload version 4, at CompressionLevel, keys and
// all; any other stays in the versions every build reads.
func TestAppendCodecVersion(t *testing.T) {
	now := int64(1_700_000_000_000_000_000)
	plain := mustBatch(t, "a", "b")
	for _, tc := range []struct {
		codec   batch.Compression
		keys    bool
		version byte
		level   FeatureLevel
	}{
		{batch.CompressionNone, false, commandVersion, BaseLevel},
		{batch.CompressionGzip, false, commandVersion, BaseLevel},
		{batch.CompressionGzip, true, appendKeysVersionV3, BaseLevel},
		{batch.CompressionSnappy, false, appendCodecsVersion, CompressionLevel},
		{batch.CompressionLZ4, true, appendCodecsVersion, CompressionLevel},
		{batch.CompressionZstd, false, appendCodecsVersion, CompressionLevel},
	} {
		t.Run(fmt.Sprintf("%s keys %t", tc.codec, tc.keys), func(t *testing.T) {
			pb := PartitionBatch{Partition: 0, Batch: compress(t, plain, tc.codec)}
			if tc.keys {
				pb = keyed(0, pb.Batch, "k1", "k2")
			}
			a := Append{Topic: "t", Batches: []PartitionBatch{{Partition: 1, Batch: plain}, pb}}
			data := encodeAppend(now, a)
			level, _, err := EntryLevel(data)
			if err != nil || data[1] != tc.version || level != tc.level {
				t.Fatalf("version %d, level %d, %v; want %d, %d", data[1], level, err, tc.version, tc.level)
			}
			if got := CodecLevel(tc.codec); (got == CompressionLevel) != (tc.level == CompressionLevel) {
				t.Errorf("CodecLevel(%s) = %d", tc.codec, got)
			}
			env, err := decodeCommandWith(data, &keyScratch{})
			if err != nil {
				t.Fatal(err)
			}
			got := env.Body.(Append)
			if env.Level != tc.level || len(got.Batches) != 2 || !bytes.Equal(got.Batches[1].Batch, pb.Batch) || len(got.Batches[1].Keys) != len(pb.Keys) {
				t.Fatalf("decoded %+v at level %d", got, env.Level)
			}
		})
	}
}

// TestQueueClaimsByAppliedLevel: below CompressionLevel, claims skip the
// records of snappy, lz4 and zstd batches, as builds before that level
// did; the first entry at the level (an append of a zstd batch) makes
// claims deliver them, those of batches stored before it included, even
// where a claim below the level had cached a window of the log without
// them. A replay from the start and a snapshot decide the same.
func TestQueueClaimsByAppliedLevel(t *testing.T) {
	f, fatals := testFSM(t, t.TempDir())
	a := &applier{t: t, f: f}
	a.apply(createCmd(t, "jobs", 1, qnow))
	a.apply(queueCmd(t, CmdQueueCreate, qnow, QueueCreate{Topic: "jobs", Group: "w", Secret: []byte("s")}))
	// Written by older builds: plain, zstd, plain, then zstd again.
	for _, b := range [][]byte{jobBatch(t, "p0"), compress(t, jobBatch(t, "z1", "z2"), batch.CompressionZstd), jobBatch(t, "p3"), compress(t, jobBatch(t, "z4"), batch.CompressionZstd)} {
		a.apply(legacyAppend(qnow, Append{Topic: "jobs", Batches: []PartitionBatch{{Partition: 0, Batch: b}}}))
	}
	values := func(c backend.QueueClaimResult) []string {
		var out []string
		for _, r := range c.Records {
			out = append(out, fmt.Sprintf("%d:%s", r.Offset, r.Record.Value))
		}
		return out
	}
	if f.AppliedLevel() >= CompressionLevel {
		t.Fatalf("applied level %d before any entry at CompressionLevel", f.AppliedLevel())
	}
	// One record: offset 0; the window cached for it holds 0 and 3 only.
	if got := values(a.claim(qnow, 1, time.Minute)); !slices.Equal(got, []string{"0:p0"}) {
		t.Fatalf("first claim %v", got)
	}
	// Below the level the zstd records are skipped: the claim passes 1
	// and 2 for 3.
	if got := values(a.claim(qnow, 1, time.Minute)); !slices.Equal(got, []string{"3:p3"}) {
		t.Fatalf("claim below the level %v, want 3:p3", got)
	}
	// The next zstd batch comes through a build at the level.
	a.apply(encodeAppend(qnow, Append{Topic: "jobs", Batches: []PartitionBatch{{Partition: 0, Batch: compress(t, jobBatch(t, "z5", "z6"), batch.CompressionZstd)}}}))
	if f.AppliedLevel() != CompressionLevel {
		t.Fatalf("applied level %d after an append at CompressionLevel", f.AppliedLevel())
	}
	// At the level: 4, stored by an older build and not passed yet, and
	// the new batch.
	if got := values(a.claim(qnow, 10, time.Minute)); !slices.Equal(got, []string{"4:z4", "5:z5", "6:z6"}) {
		t.Fatalf("claim at the level %v, want 4:z4 5:z5 6:z6", got)
	}
	if len(*fatals) > 0 {
		t.Fatal(*fatals)
	}

	// A replica replaying the same entries decides the same, and so does
	// one restored from a snapshot taken at the level.
	g, _ := testFSM(t, t.TempDir())
	b := &applier{t: t, f: g}
	var results []string
	for _, cmd := range a.log {
		if c, ok := b.apply(cmd).(backend.QueueClaimResult); ok {
			results = append(results, values(c)...)
		}
	}
	if !slices.Equal(results, []string{"0:p0", "3:p3", "4:z4", "5:z5", "6:z6"}) {
		t.Fatalf("replayed claims %v", results)
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := persist(t, snap)
	h, _ := testFSM(t, filepath.Dir(f.root))
	f.Close()
	if err := h.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if h.AppliedLevel() != CompressionLevel {
		t.Fatalf("restored applied level %d", h.AppliedLevel())
	}
}

// TestQueueClaimAfterLevelDropsCachedWindow: a claim below
// CompressionLevel caches a window of the log without the records of a
// zstd batch it skipped; once the level is reached, the records of that
// batch that no claim has passed yet are delivered, read again rather
// than taken from the stale window.
func TestQueueClaimAfterLevelDropsCachedWindow(t *testing.T) {
	f, _ := testFSM(t, t.TempDir())
	a := &applier{t: t, f: f}
	a.apply(createCmd(t, "jobs", 1, qnow))
	a.apply(queueCmd(t, CmdQueueCreate, qnow, QueueCreate{Topic: "jobs", Group: "w", Secret: []byte("s")}))
	a.apply(legacyAppend(qnow, Append{Topic: "jobs", Batches: []PartitionBatch{{Partition: 0, Batch: jobBatch(t, "p0")}}}))
	a.apply(legacyAppend(qnow, Append{Topic: "jobs", Batches: []PartitionBatch{{Partition: 0, Batch: compress(t, jobBatch(t, "z1", "z2"), batch.CompressionZstd)}}}))
	a.apply(legacyAppend(qnow, Append{Topic: "jobs", Batches: []PartitionBatch{{Partition: 0, Batch: jobBatch(t, "p3")}}}))
	if c := a.claim(qnow, 1, time.Minute); len(c.Records) != 1 || c.Records[0].Offset != 0 {
		t.Fatalf("first claim %+v", c.Records)
	}
	a.apply(encodeAppend(qnow, Append{Topic: "jobs", Batches: []PartitionBatch{{Partition: 0, Batch: compress(t, jobBatch(t, "s4"), batch.CompressionSnappy)}}}))
	var got []string
	for _, r := range a.claim(qnow, 10, time.Minute).Records {
		got = append(got, string(r.Record.Value))
	}
	if !slices.Equal(got, []string{"z1", "z2", "p3", "s4"}) {
		t.Fatalf("claim at the level %v, want z1 z2 p3 s4", got)
	}
	info, err := f.DescribeQueueGroup("jobs", "w", qnow)
	if err != nil || info.Partitions[0].InFlight != 5 {
		t.Fatalf("describe %+v, %v", info.Partitions, err)
	}
}

// TestCompactLZ4Partition: a compacted partition of lz4 batches (appended
// at CompressionLevel) compacts: the leader prepares with its codec,
// replicas apply with theirs to the same bytes, the latest value of each
// key stays, rewritten uncompressed where a batch lost records. Below the
// level the same batches are refused by the codec, as builds before it
// refused them, and no compaction is prepared.
func TestCompactLZ4Partition(t *testing.T) {
	ms := int64(1_700_000_000_000)
	now := ms * int64(time.Millisecond)
	create := mustJSON(t, CmdCreateTopic, now, CreateTopic{Name: "c", Partitions: 1, Config: map[string]string{ConfigCleanupPolicy: "compact", ConfigSegmentBytes: "100"}})
	var kvs []Append
	for i := range 8 {
		b := compress(t, keyedBatch(t, ms+int64(i), fmt.Sprint("k", i%3), fmt.Sprint("v", i), fmt.Sprint("x", i), fmt.Sprint("w", i)), batch.CompressionLZ4)
		kvs = append(kvs, Append{Topic: "c", Batches: []PartitionBatch{{Partition: 0, Batch: b}}})
	}

	t.Run("below the level", func(t *testing.T) {
		cmds := [][]byte{create}
		for _, a := range kvs {
			cmds = append(cmds, legacyAppend(now, a))
		}
		f, _ := testFSM(t, t.TempDir())
		f.ApplyBatch(entries(cmds...))
		p, _ := f.Partition("c", 0)
		below := p.Log().Segments()[len(p.Log().Segments())-1].BaseOffset
		_, err := p.Log().PrepareCompaction(log.CompactOptions{Below: below, Codec: f.RecordCodec()})
		if !errors.Is(err, batch.ErrUnsupportedCompression) {
			t.Fatalf("prepare below the level: %v, want ErrUnsupportedCompression", err)
		}
	})

	cmds := [][]byte{create}
	for _, a := range kvs {
		cmds = append(cmds, encodeAppend(now, a))
	}
	scratch, _ := testFSM(t, t.TempDir())
	scratch.ApplyBatch(entries(cmds...))
	p, _ := scratch.Partition("c", 0)
	below := p.Log().Segments()[len(p.Log().Segments())-1].BaseOffset
	cc, err := p.Log().PrepareCompaction(log.CompactOptions{Below: below, TombstoneHorizon: ms, Codec: scratch.RecordCodec()})
	if err != nil {
		t.Fatalf("prepare at the level: %v", err)
	}
	cmds = append(cmds, mustJSON(t, CmdCompact, now, Compact{Topic: "c", TopicIndex: 1, Partition: 0, Below: below, Horizon: ms,
		Checksum: cc.Checksum(), Sources: sourcesOf(p.Log().Segments(), below)}))
	cc.Discard()

	// Offsets 2i and 2i+1 hold k(i%3)=v(i) and x(i)=w(i); the last batch
	// (14, 15) is in the active segment. Below it, k0 keeps 12 (v6), k1 8
	// (v4), k2 10 (v5): 0, 2, 4 and 6 go.
	var sums []string
	for range 2 {
		dir := t.TempDir()
		f, fatals := testFSM(t, dir)
		res := f.ApplyBatch(entries(cmds...))
		if len(*fatals) > 0 {
			t.Fatal(*fatals)
		}
		if r, ok := res[len(res)-1].(CompactResult); !ok || r.Skipped || r.Stats.InputRecords-r.Stats.OutputRecords != 4 {
			t.Fatalf("compact result %#v", res[len(res)-1])
		}
		got := liveKV(t, f, "c")
		wantKV := []string{"1:x0=w0", "3:x1=w1", "5:x2=w2", "7:x3=w3", "8:k1=v4", "9:x4=w4", "10:k2=v5", "11:x5=w5", "12:k0=v6", "13:x6=w6", "14:k1=v7", "15:x7=w7"}
		if !slices.Equal(got, wantKV) {
			t.Fatalf("records after compaction %v, want %v", got, wantKV)
		}
		// Compacted batches are rewritten uncompressed; the active
		// segment's stays as appended.
		p, _ := f.Partition("c", 0)
		data, err := p.Log().Read(0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for rest := data; len(rest) > 0; {
			info, err := batch.Peek(rest)
			if err != nil {
				t.Fatal(err)
			}
			want := batch.CompressionNone
			if info.BaseOffset >= below {
				want = batch.CompressionLZ4
			}
			if info.Compression() != want {
				t.Errorf("batch at %d: %s, want %s", info.BaseOffset, info.Compression(), want)
			}
			rest = rest[info.Length:]
		}
		f.Close()
		sums = append(sums, treeDigest(t, filepath.Join(dir, "topics"), ".log"))
	}
	if sums[0] != sums[1] {
		t.Fatalf("replicas differ:\n%s\n%s", sums[0], sums[1])
	}
}
