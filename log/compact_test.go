package log_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/log/logtest"
)

// The compaction tests use their own record format inside the opaque batch
// payload of makeBatch, so they exercise the log's stitching and swapping
// independently of Kafka record encoding (package replication tests the
// real codec). A record is: offsetDelta u32, timestamp i64, flags u8
// (1 tombstone, 2 no key), key length u16, key.

type trec struct {
	key       string
	ts        int64
	tombstone bool
	noKey     bool
}

func encodeRecs(recs []trec) []byte {
	var p []byte
	for i, r := range recs {
		p = binary.BigEndian.AppendUint32(p, uint32(i))
		p = binary.BigEndian.AppendUint64(p, uint64(r.ts))
		var f byte
		if r.tombstone {
			f |= 1
		}
		if r.noKey {
			f |= 2
		}
		p = append(p, f)
		p = binary.BigEndian.AppendUint16(p, uint16(len(r.key)))
		p = append(p, r.key...)
	}
	return p
}

func recBatch(recs ...trec) []byte {
	maxTs := int64(0)
	for _, r := range recs {
		maxTs = max(maxTs, r.ts)
	}
	return makeBatch(batch{records: len(recs), maxTs: maxTs, payload: encodeRecs(recs)})
}

type testCodec struct{}

type parsedRec struct {
	log.Record
	raw []byte
}

func parseRecs(b []byte) ([]parsedRec, error) {
	base := int64(binary.BigEndian.Uint64(b))
	count := int(binary.BigEndian.Uint32(b[57:]))
	p := b[61:]
	var out []parsedRec
	for range count {
		if len(p) < 15 {
			return nil, errors.New("short record")
		}
		kl := int(binary.BigEndian.Uint16(p[13:]))
		if len(p) < 15+kl {
			return nil, errors.New("short key")
		}
		r := parsedRec{raw: p[:15+kl]}
		r.Offset = base + int64(binary.BigEndian.Uint32(p))
		r.Timestamp = int64(binary.BigEndian.Uint64(p[4:]))
		r.Tombstone = p[12]&1 != 0
		if p[12]&2 == 0 {
			r.Key = p[15 : 15+kl]
		}
		out = append(out, r)
		p = p[15+kl:]
	}
	if len(p) != 0 {
		return nil, errors.New("trailing bytes")
	}
	return out, nil
}

func (testCodec) Records(b []byte, fn func(log.Record)) error {
	recs, err := parseRecs(b)
	for _, r := range recs {
		fn(r.Record)
	}
	return err
}

func (testCodec) Filter(b []byte, keep func(log.Record) bool) ([]byte, error) {
	recs, err := parseRecs(b)
	if err != nil {
		return nil, err
	}
	out := slices.Clone(b[:61])
	n := 0
	for _, r := range recs {
		if keep(r.Record) {
			out = append(out, r.raw...)
			n++
		}
	}
	if n == 0 {
		return nil, nil
	}
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[57:], uint32(n))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], castagnoli))
	return out, nil
}

// liveRecords returns every record in the log, in order, as "offset:key"
// ("offset:key!" for tombstones), reading through Read from StartOffset.
func liveRecords(t *testing.T, l *log.Log) []string {
	t.Helper()
	var out []string
	for _, b := range readAll(t, l) {
		recs, err := parseRecs(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			s := fmt.Sprintf("%d:%s", r.Offset, r.Key)
			if r.Tombstone {
				s += "!"
			}
			out = append(out, s)
		}
	}
	return out
}

// logSum is a checksum of everything Read serves.
func logSum(t *testing.T, l *log.Log) uint32 {
	t.Helper()
	h := crc32.New(castagnoli)
	for _, b := range readAll(t, l) {
		h.Write(b)
	}
	return h.Sum32()
}

// compactWorkload appends keyed batches, one batch per segment, then one
// more batch that stays in the active segment.
func compactWorkload(t *testing.T, l *log.Log) {
	t.Helper()
	for i, recs := range [][]trec{
		{{key: "a", ts: 100}, {key: "b", ts: 100}},                  // 0,1
		{{key: "a", ts: 200}},                                       // 2
		{{key: "c", ts: 300}, {ts: 300, noKey: true}},               // 3,4
		{{key: "b", ts: 400, tombstone: true}},                      // 5
		{{key: "d", ts: 500}, {key: "d", ts: 500}},                  // 6,7
		{{key: "e", ts: 600}},                                       // 8
		{{key: "c", ts: 700}, {key: "e", ts: 700, tombstone: true}}, // 9,10
		{{key: "a", ts: 800}},                                       // 11: active
	} {
		mustAppend(t, l, recBatch(recs...), log.AppendMeta{AppliedIndex: uint64(i + 1)})
		if i < 7 {
			if err := l.Roll(log.AppendMeta{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestCompact(t *testing.T) {
	all := []string{"0:a", "1:b", "2:a", "3:c", "4:", "5:b!", "6:d", "7:d", "8:e", "9:c", "10:e!", "11:a"}
	tests := []struct {
		name    string
		below   int64
		horizon int64
		want    []string
	}{
		{name: "nothing below the first segment", below: 1, want: all},
		{name: "first two segments", below: 3, want: []string{"1:b", "2:a", "3:c", "4:", "5:b!", "6:d", "7:d", "8:e", "9:c", "10:e!", "11:a"}},
		{name: "all closed, tombstone at the horizon kept", below: 11, horizon: 400,
			want: []string{"2:a", "4:", "5:b!", "7:d", "9:c", "10:e!", "11:a"}},
		{name: "tombstone just below the horizon is dropped", below: 11, horizon: 401,
			want: []string{"2:a", "4:", "7:d", "9:c", "10:e!", "11:a"}},
		{name: "all tombstones dropped", below: 11, horizon: 1000,
			want: []string{"2:a", "4:", "7:d", "9:c", "11:a"}},
		{name: "below inside a segment stops before it", below: 10, horizon: 1000,
			want: []string{"2:a", "3:c", "4:", "7:d", "8:e", "9:c", "10:e!", "11:a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := mustOpen(t, dir, log.Options{})
			compactWorkload(t, l)
			before := l.Segments()
			c, err := l.PrepareCompaction(log.CompactOptions{Below: tc.below, TombstoneHorizon: tc.horizon, Codec: testCodec{}})
			if err != nil {
				t.Fatal(err)
			}
			if err := l.CommitCompaction(c); err != nil {
				t.Fatal(err)
			}
			if got := liveRecords(t, l); !slices.Equal(got, tc.want) {
				t.Fatalf("records\n got %v\nwant %v", got, tc.want)
			}
			after := l.Segments()
			if len(after) != len(before) {
				t.Fatalf("%d segments, had %d", len(after), len(before))
			}
			for i := range after {
				if after[i].BaseOffset != before[i].BaseOffset || after[i].EndOffset != before[i].EndOffset {
					t.Fatalf("segment %d moved: %+v -> %+v", i, before[i], after[i])
				}
				if want := before[i].Closed && before[i].EndOffset <= tc.below; after[i].Compacted != want {
					t.Fatalf("segment %d compacted=%v, want %v", i, after[i].Compacted, want)
				}
			}
			if l.EndOffset() != 12 || l.AppliedIndex() != 8 {
				t.Fatalf("end %d applied %d", l.EndOffset(), l.AppliedIndex())
			}
			// Every offset is readable: reads inside gaps get the batch
			// that covers them.
			for off := int64(0); off < 12; off++ {
				if b, err := l.Read(off, 1); err != nil || len(b) == 0 {
					t.Fatalf("Read(%d): %d bytes, %v", off, len(b), err)
				}
			}
			sum := logSum(t, l)
			// A restart serves the same bytes, and the log takes appends.
			l.Close()
			l2 := mustOpen(t, dir, log.Options{})
			if got := logSum(t, l2); got != sum {
				t.Fatalf("checksum after restart %08x, want %08x", got, sum)
			}
			mustAppend(t, l2, recBatch(trec{key: "z", ts: 900}), log.AppendMeta{})
			// Compacting again with the same options changes nothing.
			c2, err := l2.PrepareCompaction(log.CompactOptions{Below: tc.below, TombstoneHorizon: tc.horizon, Codec: testCodec{}})
			if err != nil {
				t.Fatal(err)
			}
			if err := l2.CommitCompaction(c2); err != nil {
				t.Fatal(err)
			}
			if got := liveRecords(t, l2); !slices.Equal(got[:len(got)-1], tc.want) {
				t.Fatalf("after a second pass\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// TestCompactChecksumDeterministic: logs with the same content prepare
// byte-identical output, whatever the I/O pacing and sync interval.
func TestCompactChecksumDeterministic(t *testing.T) {
	var sums []uint32
	for _, pace := range []struct{ rate, sync int64 }{{0, 0}, {1 << 40, 1}, {0, -1}} {
		l := mustOpen(t, t.TempDir(), log.Options{})
		compactWorkload(t, l)
		c, err := l.PrepareCompaction(log.CompactOptions{Below: 11, TombstoneHorizon: 450, Codec: testCodec{}, IOBytesPerSec: pace.rate, SyncBytes: pace.sync})
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, c.Checksum())
		if err := l.CommitCompaction(c); err != nil {
			t.Fatal(err)
		}
		sums = append(sums, logSum(t, l))
	}
	if sums[0] != sums[2] || sums[1] != sums[3] || sums[0] != sums[4] || sums[1] != sums[5] {
		t.Fatalf("checksums differ: %08x", sums)
	}
}

func TestCompactStale(t *testing.T) {
	fsys := logtest.NewMemFS()
	l := mustOpen(t, memDir, log.Options{FS: fsys})
	compactWorkload(t, l)
	c, err := l.PrepareCompaction(log.CompactOptions{Below: 11, Codec: testCodec{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.DeleteBefore(2); err != nil {
		t.Fatal(err)
	}
	if err := l.CommitCompaction(c); !errors.Is(err, log.ErrCompactionStale) {
		t.Fatalf("commit after a deletion: %v, want ErrCompactionStale", err)
	}
	if s := fsys.String(); bytes.Contains([]byte(s), []byte(".cleaned")) {
		t.Fatalf("cleaned files left behind:\n%s", s)
	}
	// A prepare racing a deletion fails stale too (the deleted segment is
	// gone before it is read).
	if got := liveRecords(t, l)[0]; got != "2:a" {
		t.Fatalf("first record %s", got)
	}
}

// TestCompactCrashAtEveryStep crashes (a power cut: unsynced bytes and
// directory entries lost) at every file-system operation of a prepare and
// commit; the reopened log must hold either every old segment or every new
// one, never a mix, and take appends. "after a commit" runs it on a log whose
// last compaction left its swap marker behind (CommitCompaction does not
// remove it).
func TestCompactCrashAtEveryStep(t *testing.T) {
	for _, first := range []int64{0, 5} {
		name := "fresh"
		if first > 0 {
			name = "after a commit"
		}
		t.Run(name, func(t *testing.T) { testCompactCrashAtEveryStep(t, first) })
	}
}

// testCompactCrashAtEveryStep compacts below 11; with first > 0, the setup
// compacts below first before.
func testCompactCrashAtEveryStep(t *testing.T, first int64) {
	opts := log.Options{IndexIntervalBytes: 64}
	copts := log.CompactOptions{Below: 11, TombstoneHorizon: 450, Codec: testCodec{}}
	setup := func(fsys *logtest.FaultFS) *log.Log {
		opts.FS = fsys
		l, err := log.Open(memDir, opts)
		if err != nil {
			t.Fatal(err)
		}
		compactWorkload(t, l)
		if first > 0 {
			c, err := l.PrepareCompaction(log.CompactOptions{Below: first, TombstoneHorizon: 150, Codec: testCodec{}})
			if err != nil {
				t.Fatal(err)
			}
			if err := l.CommitCompaction(c); err != nil {
				t.Fatal(err)
			}
			if _, err := fsys.Stat(memDir + "/compaction.swap"); err != nil {
				t.Fatalf("the first commit's marker: %v", err)
			}
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		return l
	}
	// Reference outcomes.
	fsys := logtest.Wrap(logtest.NewMemFS())
	l := setup(fsys)
	oldSum := logSum(t, l)
	fsys.DieAt(0)
	c, err := l.PrepareCompaction(copts)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.CommitCompaction(c); err != nil {
		t.Fatal(err)
	}
	total := fsys.Ops()
	newSum := logSum(t, l)
	l.Close()
	if oldSum == newSum {
		t.Fatal("compaction changed nothing")
	}
	sawOld, sawNew := false, false
	for k := 1; k <= total+1; k++ {
		mem := logtest.NewMemFS()
		fsys := logtest.Wrap(mem)
		l := setup(fsys)
		fsys.DieAt(k)
		c, err := l.PrepareCompaction(copts)
		if err == nil {
			err = l.CommitCompaction(c)
		}
		if k <= total && err == nil {
			t.Fatalf("step %d: no error", k)
		}
		crashed := mem.CrashClone()
		l.Close()
		opts.FS = crashed
		l2, err := log.Open(memDir, opts)
		if err != nil {
			t.Fatalf("step %d: recovery: %v\n%v", k, err, crashed)
		}
		switch got := logSum(t, l2); got {
		case oldSum:
			sawOld = true
		case newSum:
			sawNew = true
		default:
			t.Fatalf("step %d: recovered a mix (checksum %08x)\n%v", k, got, crashed)
		}
		if s := crashed.String(); bytes.Contains([]byte(s), []byte(".cleaned")) || bytes.Contains([]byte(s), []byte("compaction.swap")) {
			t.Fatalf("step %d: leftovers after recovery:\n%s", k, s)
		}
		if _, err := l2.Append(recBatch(trec{key: "z", ts: 1}), log.AppendMeta{}); err != nil {
			t.Fatalf("step %d: append after recovery: %v", k, err)
		}
		l2.Close()
	}
	if !sawOld || !sawNew {
		t.Fatalf("saw old %v, new %v: the crash points do not span the swap", sawOld, sawNew)
	}
}

// TestCompactBesideAppends prepares while another goroutine appends and
// reads (run with -race).
func TestCompactBesideAppends(t *testing.T) {
	l := mustOpen(t, t.TempDir(), log.Options{SegmentBytes: 400})
	for i := range 200 {
		mustAppend(t, l, recBatch(trec{key: fmt.Sprint(i % 7), ts: int64(i)}), log.AppendMeta{})
	}
	below := l.Segments()[len(l.Segments())-1].BaseOffset
	done := make(chan error)
	go func() {
		var err error
		for i := 0; i < 200 && err == nil; i++ {
			_, err = l.Append(recBatch(trec{key: fmt.Sprint(i % 7), ts: int64(i)}), log.AppendMeta{})
			if err == nil {
				_, err = l.Read(l.StartOffset(), 4096)
			}
		}
		done <- err
	}()
	c, err := l.PrepareCompaction(log.CompactOptions{Below: below, Codec: testCodec{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := l.CommitCompaction(c); err != nil {
		t.Fatal(err)
	}
	got := liveRecords(t, l)
	// Below the cleaning point one record per key is left.
	n := 0
	for _, s := range got {
		var off int64
		fmt.Sscanf(s, "%d:", &off)
		if off < below {
			n++
		}
	}
	if n != 7 {
		t.Fatalf("%d records below %d, want 7 (one per key): %v", n, below, got)
	}
	if c.Stats().InputBytes <= c.Stats().OutputBytes {
		t.Fatalf("stats %+v", c.Stats())
	}
}
