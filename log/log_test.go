package log_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/log/logtest"
)

// masked returns b without its leader epoch (which the log uses for the
// applied-index delta), for comparing stored batches with appended ones.
func masked(b []byte) []byte {
	out := bytes.Clone(b)
	binary.BigEndian.PutUint32(out[12:], 0)
	binary.BigEndian.PutUint64(out[0:], 0)
	return out
}

func TestAppendReadRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		opts     log.Options
		batches  int
		size     int // payload bytes
		records  int
		wantSegs int // at least
	}{
		{name: "defaults", batches: 50, size: 100, records: 3, wantSegs: 1},
		{name: "many segments", opts: log.Options{SegmentBytes: 1000, IndexIntervalBytes: 200}, batches: 200, size: 90, records: 2, wantSegs: 20},
		{name: "index every batch", opts: log.Options{SegmentBytes: 10000, IndexIntervalBytes: 1}, batches: 300, size: 10, records: 1, wantSegs: 3},
		{name: "batch larger than segment", opts: log.Options{SegmentBytes: 100}, batches: 10, size: 500, records: 5, wantSegs: 10},
		{name: "sync none", opts: log.Options{Sync: log.SyncNone, SegmentBytes: 4096}, batches: 100, size: 200, records: 7, wantSegs: 5},
		{name: "sync interval", opts: log.Options{Sync: log.SyncInterval, SegmentBytes: 4096}, batches: 100, size: 200, records: 1, wantSegs: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			clk := newClock()
			tt.opts.Now = clk.Now
			l := mustOpen(t, dir, tt.opts)
			var want [][]byte
			for i := range tt.batches {
				b := makeBatch(batch{records: tt.records, maxTs: int64(i), payload: payload(i, tt.size)})
				off := mustAppend(t, l, b, log.AppendMeta{AppliedIndex: uint64(10 + 3*i)})
				if wantOff := int64(i * tt.records); off != wantOff {
					t.Fatalf("append %d: offset %d, want %d", i, off, wantOff)
				}
				want = append(want, b)
			}
			check := func(l *log.Log) {
				t.Helper()
				if got, wantEnd := l.EndOffset(), int64(tt.batches*tt.records); got != wantEnd {
					t.Fatalf("EndOffset %d, want %d", got, wantEnd)
				}
				if got, wantAI := l.AppliedIndex(), uint64(10+3*(tt.batches-1)); got != wantAI {
					t.Fatalf("AppliedIndex %d, want %d", got, wantAI)
				}
				got := readAll(t, l)
				if len(got) != len(want) {
					t.Fatalf("read %d batches, want %d", len(got), len(want))
				}
				for i := range got {
					if !bytes.Equal(masked(got[i]), masked(want[i])) {
						t.Fatalf("batch %d differs", i)
					}
				}
				segs := l.Segments()
				if len(segs) < tt.wantSegs {
					t.Fatalf("%d segments, want >= %d", len(segs), tt.wantSegs)
				}
				var size int64
				for i, s := range segs {
					size += s.Bytes
					if i > 0 && s.BaseOffset != segs[i-1].EndOffset {
						t.Fatalf("segment %d starts at %d, previous ends at %d", i, s.BaseOffset, segs[i-1].EndOffset)
					}
					if s.Closed != (i < len(segs)-1) {
						t.Fatalf("segment %d Closed=%v", i, s.Closed)
					}
				}
				if size != l.Size() {
					t.Fatalf("Size %d, segments sum to %d", l.Size(), size)
				}
			}
			check(l)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			check(mustOpen(t, dir, tt.opts))
		})
	}
}

func TestReadMaxBytes(t *testing.T) {
	l := mustOpen(t, t.TempDir(), log.Options{})
	for i := range 10 {
		mustAppend(t, l, makeBatch(batch{records: 2, payload: payload(i, 39)}), log.AppendMeta{}) // 100 bytes each
	}
	tests := []struct {
		name        string
		offset      int64
		maxBytes    int
		wantBatches int
		wantFirst   int64
	}{
		{name: "zero max gives one batch", offset: 0, maxBytes: 0, wantBatches: 1},
		{name: "less than one batch", offset: 4, maxBytes: 50, wantBatches: 1, wantFirst: 4},
		{name: "exactly two", offset: 0, maxBytes: 200, wantBatches: 2},
		{name: "partial third cut", offset: 0, maxBytes: 299, wantBatches: 2},
		{name: "mid-batch offset", offset: 5, maxBytes: 100, wantBatches: 1, wantFirst: 4},
		{name: "to the end", offset: 16, maxBytes: 1 << 20, wantBatches: 2, wantFirst: 16},
		{name: "last record", offset: 19, maxBytes: 1, wantBatches: 1, wantFirst: 18},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := l.Read(tt.offset, tt.maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			bs := splitBatches(t, b)
			if len(bs) != tt.wantBatches || baseOffset(bs[0]) != tt.wantFirst {
				t.Fatalf("got %d batches from %d, want %d from %d", len(bs), baseOffset(bs[0]), tt.wantBatches, tt.wantFirst)
			}
		})
	}
	if b, err := l.Read(20, 100); b != nil || err != nil {
		t.Fatalf("Read(EndOffset) = %v, %v; want nil, nil", b, err)
	}
	for _, off := range []int64{-1, 21, math.MaxInt64} {
		_, err := l.Read(off, 100)
		var oor *log.OutOfRangeError
		if !errors.Is(err, log.ErrOffsetOutOfRange) || !errors.As(err, &oor) || oor.Offset != off || oor.End != 20 {
			t.Fatalf("Read(%d): %v, want OutOfRangeError", off, err)
		}
	}
	// The returned slice is the caller's: changing it changes nothing stored.
	b, _ := l.Read(0, 100)
	for i := range b {
		b[i] = 0xff
	}
	if b2, _ := l.Read(0, 100); bytes.Equal(b, b2) {
		t.Fatal("Read returned the log's own buffer")
	}
}

func TestReadAcrossSegments(t *testing.T) {
	l := mustOpen(t, t.TempDir(), log.Options{SegmentBytes: 200})
	for i := range 10 {
		mustAppend(t, l, makeBatch(batch{records: 2, payload: payload(i, 39)}), log.AppendMeta{}) // 100 bytes, 2 per segment
	}
	tests := []struct {
		offset   int64
		maxBytes int
		want     int // batches
	}{
		{offset: 0, maxBytes: 1000, want: 10},
		{offset: 2, maxBytes: 250, want: 2},
		{offset: 3, maxBytes: 300, want: 3},
		{offset: 18, maxBytes: 1000, want: 1},
		{offset: 0, maxBytes: 0, want: 1},
	}
	for _, tt := range tests {
		b, err := l.Read(tt.offset, tt.maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		bs := splitBatches(t, b)
		if len(bs) != tt.want {
			t.Fatalf("Read(%d, %d): %d batches, want %d", tt.offset, tt.maxBytes, len(bs), tt.want)
		}
		for i, x := range bs {
			if want := tt.offset/2*2 + int64(2*i); baseOffset(x) != want {
				t.Fatalf("Read(%d, %d): batch %d at %d, want %d", tt.offset, tt.maxBytes, i, baseOffset(x), want)
			}
		}
	}
}

func TestAppendDoesNotRetainOrModifyInput(t *testing.T) {
	l := mustOpen(t, t.TempDir(), log.Options{})
	mustAppend(t, l, makeBatch(batch{payload: []byte("x")}), log.AppendMeta{})
	b := makeBatch(batch{payload: []byte("hello")})
	orig := bytes.Clone(b)
	mustAppend(t, l, b, log.AppendMeta{AppliedIndex: 5})
	if !bytes.Equal(b, orig) {
		t.Fatal("Append modified its input")
	}
	for i := range b {
		b[i] = 0
	}
	got, err := l.Read(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(masked(got), masked(orig)) || baseOffset(got) != 1 {
		t.Fatal("stored batch changed with the caller's slice")
	}
}

func TestRoll(t *testing.T) {
	clk := newClock()
	opts := log.Options{SegmentBytes: 1000, SegmentMaxAge: time.Hour, Now: clk.Now}
	l := mustOpen(t, t.TempDir(), opts)
	b := makeBatch(batch{payload: payload(0, 139)}) // 200 bytes
	steps := []struct {
		advance  time.Duration
		useMeta  bool // pass the time in AppendMeta rather than through Now
		wantSegs int
	}{
		{wantSegs: 1}, {wantSegs: 1}, {wantSegs: 1}, {wantSegs: 1}, {wantSegs: 1}, // 1000 bytes: full
		{wantSegs: 2}, // size roll
		{advance: 59 * time.Minute, wantSegs: 2},
		{advance: time.Minute, wantSegs: 3}, // age roll (Now)
		{advance: 30 * time.Minute, useMeta: true, wantSegs: 3},
		{advance: 30 * time.Minute, useMeta: true, wantSegs: 4}, // age roll (meta time)
	}
	for i, s := range steps {
		clk.Add(s.advance)
		meta := log.AppendMeta{}
		if s.useMeta {
			meta.Time = clk.Now()
			clk.Add(-24 * time.Hour) // Now must not be used
		}
		mustAppend(t, l, b, meta)
		if s.useMeta {
			clk.Add(24 * time.Hour)
		}
		if got := len(l.Segments()); got != s.wantSegs {
			t.Fatalf("step %d: %d segments, want %d", i, got, s.wantSegs)
		}
	}
	// Explicit Roll, and no-op on an empty active segment.
	if err := l.Roll(log.AppendMeta{}); err != nil {
		t.Fatal(err)
	}
	if err := l.Roll(log.AppendMeta{}); err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	if len(segs) != 5 || segs[4].Bytes != 0 || segs[4].BaseOffset != l.EndOffset() || !segs[3].Closed {
		t.Fatalf("after Roll: %+v", segs)
	}
	if off := mustAppend(t, l, b, log.AppendMeta{}); off != 10 {
		t.Fatalf("offset after roll %d", off)
	}
}

func TestOffsetForTime(t *testing.T) {
	for _, interval := range []int{1, 150, 4096} {
		l := mustOpen(t, t.TempDir(), log.Options{SegmentBytes: 1000, IndexIntervalBytes: interval})
		// maxTs: 0, 10, 20, ... with one out-of-order batch (offset 10 has ts 5).
		for i := range 30 {
			ts := int64(i * 10)
			if i == 10 {
				ts = 5
			}
			mustAppend(t, l, makeBatch(batch{records: 2, maxTs: ts, payload: payload(i, 40)}), log.AppendMeta{})
		}
		tests := []struct {
			ts   int64
			want int64
		}{
			{ts: math.MinInt64, want: 0},
			{ts: 0, want: 0},
			{ts: 1, want: 2},
			{ts: 10, want: 2},
			{ts: 6, want: 2},   // batch 10 (ts 5) is not first: batch 1 (ts 10) is
			{ts: 95, want: 22}, // batch 10 (ts 5) is skipped; batch 11 (ts 110) is first
			{ts: 100, want: 22},
			{ts: 290, want: 58},
			{ts: 291, want: 60}, // none: EndOffset
		}
		for _, tt := range tests {
			got, err := l.OffsetForTime(tt.ts)
			if err != nil || got != tt.want {
				t.Errorf("interval %d: OffsetForTime(%d) = %d, %v; want %d", interval, tt.ts, got, err, tt.want)
			}
		}
	}
}

func TestDeleteBefore(t *testing.T) {
	dir := t.TempDir()
	opts := log.Options{SegmentBytes: 300}
	l := mustOpen(t, dir, opts)
	for i := range 10 {
		mustAppend(t, l, makeBatch(batch{records: 10, payload: payload(i, 139)}), log.AppendMeta{AppliedIndex: uint64(i + 1)})
	}
	// Segments of one batch each: [0,10) [10,20) ... [90,100) active.
	tests := []struct {
		offset    int64
		want      int
		wantStart int64
	}{
		{offset: 0, want: 0, wantStart: 0},
		{offset: 9, want: 0, wantStart: 0},
		{offset: 10, want: 1, wantStart: 10},
		{offset: 35, want: 2, wantStart: 30},
		{offset: 1000, want: 6, wantStart: 90}, // never the active segment
	}
	for _, tt := range tests {
		n, err := l.DeleteBefore(tt.offset)
		if err != nil || n != tt.want || l.StartOffset() != tt.wantStart {
			t.Fatalf("DeleteBefore(%d) = %d, %v, start %d; want %d, start %d", tt.offset, n, err, l.StartOffset(), tt.want, tt.wantStart)
		}
	}
	if _, err := l.Read(89, 10); !errors.Is(err, log.ErrOffsetOutOfRange) {
		t.Fatalf("Read below start: %v", err)
	}
	l.Close()
	l = mustOpen(t, dir, opts)
	if l.StartOffset() != 90 || l.EndOffset() != 100 || l.AppliedIndex() != 10 {
		t.Fatalf("after reopen: start %d end %d applied %d", l.StartOffset(), l.EndOffset(), l.AppliedIndex())
	}
	if got := len(readAll(t, l)); got != 1 {
		t.Fatalf("%d batches", got)
	}
}

func TestTruncateTo(t *testing.T) {
	setup := func(t *testing.T, dir string) *log.Log {
		l := mustOpen(t, dir, log.Options{SegmentBytes: 450, IndexIntervalBytes: 100})
		for i := range 10 {
			// 200-byte batches of 2 records, two per segment; applied index 100+i.
			mustAppend(t, l, makeBatch(batch{records: 2, maxTs: int64(i), payload: payload(i, 139)}), log.AppendMeta{AppliedIndex: uint64(100 + i)})
		}
		return l
	}
	tests := []struct {
		name        string
		end         int64
		wantErr     error
		wantApplied uint64
		wantSegs    int
	}{
		{name: "no-op at end", end: 20, wantApplied: 109, wantSegs: 5},
		{name: "last batch", end: 18, wantApplied: 108, wantSegs: 5},
		{name: "segment boundary", end: 16, wantApplied: 107, wantSegs: 4},
		{name: "mid segment", end: 10, wantApplied: 104, wantSegs: 3},
		{name: "everything", end: 0, wantApplied: 0, wantSegs: 1}, // the applied index before the first batch
		{name: "inside a batch", end: 5, wantErr: log.ErrNotBatchBoundary},
		{name: "above end", end: 21, wantErr: log.ErrOffsetOutOfRange},
		{name: "negative", end: -1, wantErr: log.ErrOffsetOutOfRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			l := setup(t, dir)
			err := l.TruncateTo(tt.end)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("TruncateTo(%d) = %v, want %v", tt.end, err, tt.wantErr)
				}
				if l.EndOffset() != 20 || len(readAll(t, l)) != 10 {
					t.Fatal("a failed TruncateTo changed the log")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			check := func(l *log.Log) {
				t.Helper()
				if l.EndOffset() != tt.end || l.AppliedIndex() != tt.wantApplied || len(l.Segments()) != tt.wantSegs {
					t.Fatalf("end %d applied %d segs %d; want %d %d %d", l.EndOffset(), l.AppliedIndex(), len(l.Segments()), tt.end, tt.wantApplied, tt.wantSegs)
				}
				if got := len(readAll(t, l)); got != int(tt.end/2) {
					t.Fatalf("%d batches", got)
				}
			}
			check(l)
			// Appends continue densely, and everything survives reopen.
			mustAppend(t, l, makeBatch(batch{records: 2, payload: payload(99, 139)}), log.AppendMeta{AppliedIndex: 200})
			if err := l.TruncateTo(tt.end); err != nil {
				t.Fatal(err)
			}
			l.Close()
			check(mustOpen(t, dir, log.Options{SegmentBytes: 450, IndexIntervalBytes: 100}))
		})
	}
}

func TestInvalidBatch(t *testing.T) {
	good := makeBatch(batch{records: 3, payload: []byte("records")})
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	tests := []struct {
		name    string
		batch   []byte
		wantErr error
	}{
		{name: "empty", batch: nil, wantErr: log.ErrInvalidBatch},
		{name: "short", batch: good[:60], wantErr: log.ErrInvalidBatch},
		{name: "truncated", batch: good[:len(good)-1], wantErr: log.ErrInvalidBatch},
		{name: "extra byte", batch: append(bytes.Clone(good), 0), wantErr: log.ErrInvalidBatch},
		{name: "bad magic", batch: mut(func(b []byte) []byte { b[16] = 1; return b }), wantErr: log.ErrInvalidBatch},
		{name: "bad crc", batch: mut(func(b []byte) []byte { b[17] ^= 1; return b }), wantErr: log.ErrInvalidBatch},
		{name: "bad record byte", batch: mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), wantErr: log.ErrInvalidBatch},
		{name: "count mismatch", batch: mut(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[57:], 2)
			binary.BigEndian.PutUint32(b[17:], crc(b))
			return b
		}), wantErr: log.ErrInvalidBatch},
		{name: "negative length", batch: mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:], 0x80000000); return b }), wantErr: log.ErrInvalidBatch},
		{name: "too large", batch: makeBatch(batch{payload: make([]byte, 1000)}), wantErr: log.ErrBatchTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			l := mustOpen(t, dir, log.Options{MaxBatchBytes: 1000})
			mustAppend(t, l, good, log.AppendMeta{AppliedIndex: 1})
			before := l.Segments()
			_, err := l.Append(tt.batch, log.AppendMeta{AppliedIndex: 2})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Append: %v, want %v", err, tt.wantErr)
			}
			var ibe *log.InvalidBatchError
			if tt.wantErr == log.ErrInvalidBatch && (!errors.As(err, &ibe) || ibe.Reason == "") {
				t.Fatalf("%v is not an *InvalidBatchError", err)
			}
			if after := l.Segments(); after[0] != before[0] || l.AppliedIndex() != 1 {
				t.Fatalf("a refused Append changed the log: %+v -> %+v", before, after)
			}
			// The log still works.
			if off := mustAppend(t, l, good, log.AppendMeta{AppliedIndex: 2}); off != 3 {
				t.Fatalf("next offset %d", off)
			}
		})
	}
}

func TestAppliedIndex(t *testing.T) {
	dir := t.TempDir()
	opts := log.Options{SegmentBytes: 1 << 20}
	l := mustOpen(t, dir, opts)
	if l.AppliedIndex() != 0 {
		t.Fatal("empty log has an applied index")
	}
	b := makeBatch(batch{payload: []byte("v")})
	steps := []struct {
		applied uint64
		want    uint64
		wantErr error
	}{
		{applied: 5, want: 5},
		{applied: 0, want: 5}, // unchanged
		{applied: 5, want: 5},
		{applied: 4, want: 5, wantErr: log.ErrAppliedIndexRegressed},
		{applied: 1 << 31, want: 1 << 31},
		{applied: 1<<32 + 6, want: 1<<32 + 6}, // delta > uint32 from the base (5): rolls
		{applied: math.MaxUint64, want: math.MaxUint64},
	}
	for i, s := range steps {
		_, err := l.Append(b, log.AppendMeta{AppliedIndex: s.applied})
		if !errors.Is(err, s.wantErr) || l.AppliedIndex() != s.want {
			t.Fatalf("step %d: err %v applied %d; want %v %d", i, err, l.AppliedIndex(), s.wantErr, s.want)
		}
	}
	if n := len(l.Segments()); n != 3 {
		t.Fatalf("%d segments, want 3 (two uint32 overflows)", n)
	}
	// An empty active segment (after Roll) far behind: rebased, not rolled.
	if err := l.Roll(log.AppendMeta{}); err != nil {
		t.Fatal(err)
	}
	if err := l.Roll(log.AppendMeta{AppliedIndex: 3}); !errors.Is(err, log.ErrAppliedIndexRegressed) {
		t.Fatalf("Roll with a regressed index: %v", err)
	}
	l.Close()
	l = mustOpen(t, dir, opts)
	if l.AppliedIndex() != math.MaxUint64 || l.EndOffset() != 6 {
		t.Fatalf("after reopen: applied %d end %d", l.AppliedIndex(), l.EndOffset())
	}

	// Rebase of an empty active segment.
	dir2 := t.TempDir()
	l2 := mustOpen(t, dir2, opts)
	mustAppend(t, l2, b, log.AppendMeta{AppliedIndex: 1})
	if err := l2.Roll(log.AppendMeta{AppliedIndex: 2}); err != nil {
		t.Fatal(err)
	}
	if l2.AppliedIndex() != 2 {
		t.Fatalf("after Roll: %d", l2.AppliedIndex())
	}
	mustAppend(t, l2, b, log.AppendMeta{AppliedIndex: 1 << 40})
	if n := len(l2.Segments()); n != 2 {
		t.Fatalf("%d segments after rebase, want 2", n)
	}
	l2.Close()
	l2 = mustOpen(t, dir2, opts)
	if l2.AppliedIndex() != 1<<40 {
		t.Fatalf("after reopen: %d", l2.AppliedIndex())
	}
}

func TestClosed(t *testing.T) {
	l, err := log.Open(t.TempDir(), log.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, makeBatch(batch{}), log.AppendMeta{})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b := makeBatch(batch{})
	checks := map[string]error{
		"Close":  l.Close(),
		"Sync":   l.Sync(),
		"Roll":   l.Roll(log.AppendMeta{}),
		"Trunc":  l.TruncateTo(0),
		"Append": func() error { _, err := l.Append(b, log.AppendMeta{}); return err }(),
		"Read":   func() error { _, err := l.Read(0, 1); return err }(),
		"Time":   func() error { _, err := l.OffsetForTime(0); return err }(),
		"Delete": func() error { _, err := l.DeleteBefore(0); return err }(),
	}
	for name, err := range checks {
		if !errors.Is(err, log.ErrClosed) {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		opts log.Options
		ok   bool
	}{
		{name: "zero", ok: true},
		{name: "negative segment", opts: log.Options{SegmentBytes: -1}},
		{name: "segment too large", opts: log.Options{SegmentBytes: 1 << 33}},
		{name: "tiny batch", opts: log.Options{MaxBatchBytes: 60}},
		{name: "negative age", opts: log.Options{SegmentMaxAge: -1}},
		{name: "bad policy", opts: log.Options{Sync: 7}},
		{name: "negative interval", opts: log.Options{IndexIntervalBytes: -1}},
	}
	for _, tt := range tests {
		if err := tt.opts.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: Validate() = %v", tt.name, err)
		}
		if _, err := log.Open(t.TempDir(), tt.opts); (err == nil) != tt.ok {
			t.Errorf("%s: Open: %v", tt.name, err)
		}
	}
}

// TestConcurrentReaders runs readers against one appender (run with -race).
func TestConcurrentReaders(t *testing.T) {
	l := mustOpen(t, t.TempDir(), log.Options{SegmentBytes: 2000, IndexIntervalBytes: 100, Sync: log.SyncNone})
	const n = 500
	var wg sync.WaitGroup
	done := make(chan struct{})
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				end := l.EndOffset()
				start := l.StartOffset()
				if end == start {
					continue
				}
				off := start + int64(r)%(end-start)
				b, err := l.Read(off, 500)
				if err != nil {
					if errors.Is(err, log.ErrOffsetOutOfRange) {
						continue // DeleteBefore moved the start
					}
					t.Errorf("Read(%d): %v", off, err)
					return
				}
				if len(b) == 0 {
					t.Errorf("Read(%d) empty", off)
					return
				}
				if _, err := l.OffsetForTime(int64(r)); err != nil {
					t.Errorf("OffsetForTime: %v", err)
					return
				}
				_ = l.Segments()
			}
		}()
	}
	for i := range n {
		mustAppend(t, l, makeBatch(batch{maxTs: int64(i), payload: payload(i, 50)}), log.AppendMeta{AppliedIndex: uint64(i + 1)})
		if i%100 == 99 {
			if _, err := l.DeleteBefore(int64(i - 50)); err != nil {
				t.Fatal(err)
			}
		}
		if i == 300 {
			if err := l.TruncateTo(290); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(done)
	wg.Wait()
}

func crc(b []byte) uint32 {
	return crc32c(b[21:])
}

// TestSyncPolicy counts data-file syncs under each policy.
func TestSyncPolicy(t *testing.T) {
	b := makeBatch(batch{payload: []byte("v")})
	tests := []struct {
		policy    log.SyncPolicy
		step      time.Duration // clock advance per append
		wantSyncs int           // for 10 appends, before Close
	}{
		{policy: log.SyncEveryAppend, wantSyncs: 10},
		{policy: log.SyncInterval, step: 300 * time.Millisecond, wantSyncs: 2}, // at 1.2s and 2.4s after the last sync
		{policy: log.SyncNone, step: time.Hour, wantSyncs: 0},
	}
	for _, tt := range tests {
		mem := logtest.NewMemFS()
		fsys := logtest.Wrap(mem)
		clk := newClock()
		l := mustOpen(t, memDir, log.Options{FS: fsys, Sync: tt.policy, Now: clk.Now, SegmentMaxAge: 1000 * time.Hour})
		mustAppend(t, l, b, log.AppendMeta{}) // creates the segment (syncs its files)
		before := fsys.Syncs()
		for range 10 {
			clk.Add(tt.step)
			mustAppend(t, l, b, log.AppendMeta{})
		}
		got := fsys.Syncs() - before
		if got != tt.wantSyncs {
			t.Errorf("policy %d: %d syncs, want %d", tt.policy, got, tt.wantSyncs)
		}
		// Close syncs whatever the policy: a power cut after it loses nothing.
		l.Close()
		l2 := mustOpen(t, memDir, log.Options{FS: mem.CrashClone()})
		if l2.EndOffset() != 11 {
			t.Errorf("policy %d: %d batches after Close and a power cut", tt.policy, l2.EndOffset())
		}
	}
}

// TestAgeSurvivesRestart: a segment's age counts from its creation, across
// restarts.
func TestAgeSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	opts := log.Options{SegmentMaxAge: time.Hour, Now: clk.Now}
	l := mustOpen(t, dir, opts)
	mustAppend(t, l, makeBatch(batch{}), log.AppendMeta{})
	l.Close()
	clk.Add(time.Hour)
	l = mustOpen(t, dir, opts)
	mustAppend(t, l, makeBatch(batch{}), log.AppendMeta{})
	if n := len(l.Segments()); n != 2 {
		t.Fatalf("%d segments, want 2", n)
	}
}

// TestReadBoundedMatchesItsEnd: under concurrent appends, a read with room
// for everything returns exactly the batches up to the end it reports,
// never an end a later append moved past the batches read.
func TestReadBoundedMatchesItsEnd(t *testing.T) {
	l := mustOpen(t, t.TempDir(), log.Options{SegmentBytes: 4000, IndexIntervalBytes: 100, Sync: log.SyncNone})
	const n = 400
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			mustAppend(t, l, makeBatch(batch{payload: payload(i, 40)}), log.AppendMeta{AppliedIndex: uint64(i + 1)})
		}
	}()
	reads := 0
	for {
		select {
		case <-done:
		default:
			data, start, end, err := l.ReadBounded(0, 1<<20)
			if err != nil {
				t.Fatalf("ReadBounded: %v", err)
			}
			bs := splitBatches(t, data)
			if start != 0 || int64(len(bs)) != end {
				t.Fatalf("read %d batches with bounds [%d, %d)", len(bs), start, end)
			}
			reads++
			continue
		}
		break
	}
	if _, _, end, err := l.ReadBounded(0, 1<<20); err != nil || end != n {
		t.Fatalf("end %d, %v; want %d", end, err, n)
	}
	t.Logf("%d reads during the appends", reads)
}

// TestReadRecordsBound: a read bounded by a record count returns a prefix
// of the unbounded read that holds at least that many records from the
// offset (or every one there is), across segments, and reads far less
// than max bytes when few records are wanted.
func TestReadRecordsBound(t *testing.T) {
	l := mustOpen(t, t.TempDir(), log.Options{SegmentBytes: 4000, IndexIntervalBytes: 200, Sync: log.SyncNone})
	for i := range 300 {
		mustAppend(t, l, makeBatch(batch{records: 3, payload: payload(i, 40)}), log.AppendMeta{AppliedIndex: uint64(i + 1)})
	}
	end := l.EndOffset()
	for _, off := range []int64{0, 1, 2, 3, 100, 451, end - 5, end - 1} {
		full, err := l.Read(off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []int{1, 2, 3, 4, 10, 50, 2000} {
			got, _, e, err := l.ReadRecords(off, 1<<20, k)
			if err != nil || e != end {
				t.Fatalf("ReadRecords(%d, %d): end %d, %v", off, k, e, err)
			}
			if !bytes.HasPrefix(full, got) || len(got) == 0 {
				t.Fatalf("ReadRecords(%d, %d): %d bytes, not a prefix of the %d-byte read", off, k, len(got), len(full))
			}
			bs := splitBatches(t, got)
			last := bs[len(bs)-1]
			next := baseOffset(last) + int64(binary.BigEndian.Uint32(last[23:])) + 1
			if want := min(off+int64(k), end); next < want {
				t.Errorf("ReadRecords(%d, %d) ends at %d, want at least %d", off, k, next, want)
			}
			if k <= 10 && len(got) > 1000 {
				t.Errorf("ReadRecords(%d, %d) read %d bytes for %d records", off, k, len(got), k)
			}
		}
	}
}
