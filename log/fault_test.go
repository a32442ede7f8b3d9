package log_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/log/logtest"
)

const memDir = "/data/p0"

// history is what a test appended and had acknowledged.
type history struct {
	acked   [][]byte // stored form of acknowledged batches, by position
	applied []uint64 // applied index after each acknowledged batch
}

// checkPrefix checks that l holds exactly a prefix of h that includes at
// least the first minAcked batches, byte for byte (applied-index deltas
// masked), and an applied index matching its last batch.
func checkPrefix(t *testing.T, l *log.Log, h *history, minAcked int) int {
	t.Helper()
	first := 0 // batches below StartOffset were deleted
	for first < len(h.acked) && baseOffset(h.acked[first]) < l.StartOffset() {
		first++
	}
	got := readAll(t, l)
	n := first + len(got)
	if n < minAcked || n > len(h.acked) {
		t.Fatalf("recovered batches up to %d, want between %d and %d", n, minAcked, len(h.acked))
	}
	for i := range got {
		if want := h.acked[first+i]; !bytes.Equal(masked(got[i]), masked(want)) || baseOffset(got[i]) != baseOffset(want) {
			t.Fatalf("batch %d differs from the one appended", first+i)
		}
	}
	if len(got) > 0 && l.AppliedIndex() != h.applied[n-1] {
		t.Fatalf("AppliedIndex %d, want %d", l.AppliedIndex(), h.applied[n-1])
	}
	return n
}

// workload appends n batches (rolling every few), recording acknowledged
// ones, until the first error.
func workload(l *log.Log, h *history, n int) error {
	start := len(h.acked)
	for j := range n {
		i := start + j
		b := makeBatch(batch{records: 1 + i%3, maxTs: int64(i), payload: payload(i, 50+i%70)})
		ai := uint64(1000 + 2*i)
		off, err := l.Append(b, log.AppendMeta{AppliedIndex: ai})
		if err != nil {
			return err
		}
		h.acked = append(h.acked, stored(b, off, 0))
		h.applied = append(h.applied, ai)
		if i%7 == 6 {
			if err := l.Roll(log.AppendMeta{}); err != nil {
				return err
			}
		}
		if i%11 == 10 {
			if _, err := l.DeleteBefore(int64(i / 4)); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestCrashAtEveryStep kills the "process" at every mutating file-system
// operation of a workload (appends, index writes, syncs, rolls, deletions),
// cuts the power (dropping unsynced bytes and directory entries), and checks
// that recovery succeeds unaided and keeps every acknowledged batch.
func TestCrashAtEveryStep(t *testing.T) {
	opts := log.Options{SegmentBytes: 600, IndexIntervalBytes: 150}
	const n = 30
	// Count the operations of a clean run.
	fsys := logtest.Wrap(logtest.NewMemFS())
	opts.FS = fsys
	l := mustOpen(t, memDir, opts)
	fsys.DieAt(0)
	if err := workload(l, &history{}, n); err != nil {
		t.Fatal(err)
	}
	total := fsys.Ops()
	for k := 1; k <= total+1; k++ {
		mem := logtest.NewMemFS()
		fsys := logtest.Wrap(mem)
		opts.FS = fsys
		l, err := log.Open(memDir, opts)
		if err != nil {
			t.Fatal(err)
		}
		fsys.DieAt(k)
		var h history
		werr := workload(l, &h, n)
		if k <= total && werr == nil {
			t.Fatalf("step %d: no error", k)
		}
		crashed := mem.CrashClone()
		l.Close()
		opts.FS = crashed
		l2, err := log.Open(memDir, opts)
		if err != nil {
			t.Fatalf("step %d: recovery: %v\n%v", k, err, crashed)
		}
		// Deleted segments are gone or back; what remains is a prefix
		// ending at or after the last acknowledged batch.
		start := l2.StartOffset()
		var first int
		for first < len(h.acked) && baseOffset(h.acked[first]) < start {
			first++
		}
		got := readAll(t, l2)
		if len(got) < len(h.acked)-first {
			t.Fatalf("step %d: lost acknowledged batches: %d recovered from offset %d, %d acknowledged", k, len(got), start, len(h.acked)-first)
		}
		for i := range got {
			if first+i < len(h.acked) && !bytes.Equal(masked(got[i]), masked(h.acked[first+i])) {
				t.Fatalf("step %d: batch %d differs", k, i)
			}
		}
		if len(got) == len(h.acked)-first && len(h.acked) > 0 && l2.AppliedIndex() != h.applied[len(h.acked)-1] {
			t.Fatalf("step %d: AppliedIndex %d, want %d", k, l2.AppliedIndex(), h.applied[len(h.acked)-1])
		}
		// The recovered log takes appends.
		if _, err := l2.Append(makeBatch(batch{}), log.AppendMeta{}); err != nil {
			t.Fatalf("step %d: append after recovery: %v", k, err)
		}
		l2.Close()
	}
}

// TestPowerCut drops unsynced bytes after acknowledged appends: with
// SyncEveryAppend nothing acknowledged is lost; with SyncNone (the checker's
// control) the same check must find losses.
func TestPowerCut(t *testing.T) {
	for _, tt := range []struct {
		policy   log.SyncPolicy
		wantLoss bool
	}{{policy: log.SyncEveryAppend}, {policy: log.SyncNone, wantLoss: true}} {
		t.Run(fmt.Sprint(tt.policy), func(t *testing.T) {
			fsys := logtest.NewMemFS()
			opts := log.Options{SegmentBytes: 2000, IndexIntervalBytes: 100, Sync: tt.policy, FS: fsys}
			l := mustOpen(t, memDir, opts)
			var h history
			lost := 0
			for round := range 5 {
				if err := workload(l, &h, 10); err != nil {
					t.Fatal(err)
				}
				opts.FS = fsys.CrashClone()
				l.Close()
				l = mustOpen(t, memDir, opts)
				fsys = opts.FS.(*logtest.MemFS)
				want := len(h.acked)
				got := checkPrefix(t, l, &h, 0)
				lost += want - got
				if !tt.wantLoss && got != want {
					t.Fatalf("round %d: %d of %d acknowledged batches survived", round, got, want)
				}
				h.acked, h.applied = h.acked[:got], h.applied[:got]
			}
			if tt.wantLoss && lost == 0 {
				t.Fatal("the checker found no loss without fsync: it cannot be trusted")
			}
		})
	}
}

// TestTornTail cuts the last batch at every byte (and zero-fills the rest,
// as some file systems do after a crash): recovery keeps exactly the whole
// batches before it, and the log takes appends again.
func TestTornTail(t *testing.T) {
	for _, zeroFill := range []bool{false, true} {
		fsys := logtest.NewMemFS()
		opts := log.Options{IndexIntervalBytes: 100, FS: fsys}
		l := mustOpen(t, memDir, opts)
		var h history
		if err := workload(l, &h, 5); err != nil { // 5 batches, one roll
			t.Fatal(err)
		}
		l.Close()
		segs := l.Segments()
		active := segs[len(segs)-1]
		name := segFile(memDir, active.BaseOffset, ".log")
		data := fsys.Data(name)
		last := h.acked[len(h.acked)-1]
		lastPos := len(data) - len(last)
		for cut := lastPos; cut < len(data); cut++ {
			torn := fsys.CrashClone()
			b := bytes.Clone(data[:cut])
			if zeroFill {
				b = append(b, make([]byte, len(data)-cut)...)
			}
			torn.SetData(name, b)
			opts.FS = torn
			l, err := log.Open(memDir, opts)
			if err != nil {
				t.Fatalf("cut at %d (zero fill %v): %v", cut, zeroFill, err)
			}
			if got := checkPrefix(t, l, &h, len(h.acked)-1); got != len(h.acked)-1 {
				t.Fatalf("cut at %d: %d batches survived", cut, got)
			}
			if n := len(torn.Data(name)); n != lastPos {
				t.Fatalf("cut at %d: data file is %d bytes after recovery, want %d", cut, n, lastPos)
			}
			if off, err := l.Append(last, log.AppendMeta{}); err != nil || off != baseOffset(last) {
				t.Fatalf("append after recovery: %d, %v", off, err)
			}
			l.Close()
		}
	}
}

// TestBitFlip flips one bit at every byte of every data file: each flip is
// either reported (*CorruptionError, from Open or Read), or cut as a torn
// tail when it is in the last batch of the active segment; a damaged batch is
// never served. Flips in the leader-epoch field (outside the CRC, holding the
// applied-index delta) are excluded: see the package caveats.
func TestBitFlip(t *testing.T) {
	base := logtest.NewMemFS()
	opts := log.Options{SegmentBytes: 600, IndexIntervalBytes: 100, FS: base}
	l := mustOpen(t, memDir, opts)
	var h history
	if err := workload(l, &h, 10); err != nil {
		t.Fatal(err)
	}
	l.Close()
	segs := l.Segments()
	if len(segs) < 3 || segs[len(segs)-1].EndOffset-segs[len(segs)-1].BaseOffset < 3 {
		t.Fatalf("want closed segments and >= 3 batches in the active one: %+v", segs)
	}
	for si, seg := range segs {
		name := segFile(memDir, seg.BaseOffset, ".log")
		data := base.Data(name)
		for pos := range len(data) {
			// Where is pos in its batch?
			bstart := 0
			for bstart+len(batchAtPos(data, bstart)) <= pos {
				bstart += len(batchAtPos(data, bstart))
			}
			if rel := pos - bstart; rel >= 12 && rel < 16 {
				continue // leader epoch: the applied-index delta
			}
			lastOfActive := si == len(segs)-1 && bstart+len(batchAtPos(data, bstart)) == len(data)
			fsys := base.CrashClone()
			fsys.FlipBit(name, int64(pos), uint(pos%8))
			opts.FS = fsys
			l, err := log.Open(memDir, opts)
			if err != nil {
				if !isCorrupt(err) {
					t.Fatalf("segment %d pos %d: Open: %v", si, pos, err)
				}
				continue
			}
			served, reported := 0, false
			for off := l.StartOffset(); off < l.EndOffset(); {
				b, err := l.Read(off, 1<<20)
				if err != nil {
					if !isCorrupt(err) {
						t.Fatalf("segment %d pos %d: Read(%d): %v", si, pos, off, err)
					}
					reported = true
					// Skip the damaged batch using the original layout.
					off = nextOffsetAfter(h.acked, off)
					continue
				}
				for _, x := range splitBatches(t, b) {
					i := indexOf(h.acked, baseOffset(x))
					if i < 0 || !bytes.Equal(masked(x), masked(h.acked[i])) {
						t.Fatalf("segment %d pos %d: served a damaged batch at %d", si, pos, baseOffset(x))
					}
					served++
					off = nextOffsetAfter(h.acked, baseOffset(x))
				}
			}
			l.Close()
			switch {
			case lastOfActive && !reported && served == len(h.acked)-1:
				// torn-tail truncation of the last batch
			case reported:
			default:
				t.Fatalf("segment %d pos %d: flip neither reported nor cut (served %d of %d)", si, pos, served, len(h.acked))
			}
		}
	}
}

// TestIndexDamage flips a bit at every byte of every index file, and
// truncates and removes them: the indexes are rebuilt, and reads and time
// lookups stay correct.
func TestIndexDamage(t *testing.T) {
	base := logtest.NewMemFS()
	opts := log.Options{SegmentBytes: 2000, IndexIntervalBytes: 100, FS: base}
	l := mustOpen(t, memDir, opts)
	var h history
	if err := workload(l, &h, 40); err != nil {
		t.Fatal(err)
	}
	l.Close()
	check := func(what string, fsys *logtest.MemFS) {
		t.Helper()
		opts.FS = fsys
		l, err := log.Open(memDir, opts)
		if err != nil {
			t.Fatalf("%s: Open: %v", what, err)
		}
		defer func() {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			// Every offset-index entry was used and checked, so a damaged
			// .index was rebuilt, and persisted by Open or Close.
			for _, seg := range l.Segments() {
				name := segFile(memDir, seg.BaseOffset, ".index")
				if !bytes.Equal(fsys.Data(name), base.Data(name)) {
					t.Fatalf("%s: %s not repaired", what, name)
				}
			}
		}()
		checkPrefix(t, l, &h, len(h.acked))
		// Every batch is found from every offset it holds.
		for _, b := range h.acked {
			got, err := l.Read(baseOffset(b)+int64(lastDelta(b)), 0)
			if err != nil || !bytes.Equal(masked(got), masked(b)) {
				t.Fatalf("%s: Read(%d): %v", what, baseOffset(b)+int64(lastDelta(b)), err)
			}
			// maxTs of batch i is i (workload), strictly increasing.
			off, err := l.OffsetForTime(maxTs(b))
			if err != nil || off != baseOffset(b) {
				t.Fatalf("%s: OffsetForTime(%d) = %d, %v; want %d", what, maxTs(b), off, err, baseOffset(b))
			}
		}
	}
	for _, seg := range l.Segments() {
		for _, ext := range []string{".index", ".timeindex"} {
			name := segFile(memDir, seg.BaseOffset, ext)
			data := base.Data(name)
			for pos := range len(data) {
				for _, bit := range []uint{0, 7} {
					fsys := base.CrashClone()
					fsys.FlipBit(name, int64(pos), bit)
					check(fmt.Sprintf("%s flip %d.%d", name, pos, bit), fsys)
				}
			}
			for _, cut := range []int{0, len(data) / 2, len(data) - 1} {
				if cut < 0 {
					continue
				}
				fsys := base.CrashClone()
				fsys.SetData(name, data[:cut])
				check(fmt.Sprintf("%s cut at %d", name, cut), fsys)
			}
			fsys := base.CrashClone()
			if err := fsys.Remove(name); err != nil {
				t.Fatal(err)
			}
			check(name+" removed", fsys)
		}
	}
}

// TestFailedWriteOrSync injects EIO and ENOSPC into writes and syncs: Append
// fails, the batch is not readable, the error is sticky, and after a restart
// (with or without a power cut) every acknowledged batch is there and the
// failed one is not.
func TestFailedWriteOrSync(t *testing.T) {
	tests := []struct {
		name string
		arm  func(*logtest.FaultFS)
		want error
	}{
		{name: "write EIO", arm: func(f *logtest.FaultFS) { f.FailNextWrite(syscall.EIO, 0) }, want: syscall.EIO},
		{name: "write ENOSPC partial header", arm: func(f *logtest.FaultFS) { f.FailNextWrite(syscall.ENOSPC, 30) }, want: syscall.ENOSPC},
		{name: "sync EIO", arm: func(f *logtest.FaultFS) { f.FailNextSync(syscall.EIO) }, want: syscall.EIO},
		{name: "sync ENOSPC", arm: func(f *logtest.FaultFS) { f.FailNextSync(syscall.ENOSPC) }, want: syscall.ENOSPC},
	}
	for _, tt := range tests {
		for _, crash := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s crash=%v", tt.name, crash), func(t *testing.T) {
				mem := logtest.NewMemFS()
				fsys := logtest.Wrap(mem)
				opts := log.Options{IndexIntervalBytes: 1, FS: fsys}
				l := mustOpen(t, memDir, opts)
				var h history
				if err := workload(l, &h, 5); err != nil {
					t.Fatal(err)
				}
				end := l.EndOffset()
				tt.arm(fsys)
				b := makeBatch(batch{payload: payload(99, 100)})
				if _, err := l.Append(b, log.AppendMeta{}); !errors.Is(err, tt.want) {
					t.Fatalf("Append: %v, want %v", err, tt.want)
				}
				if l.EndOffset() != end {
					t.Fatal("a failed append moved EndOffset")
				}
				if got, err := l.Read(end, 0); got != nil || err != nil {
					t.Fatalf("failed batch readable: %v %v", got, err)
				}
				if _, err := l.Append(b, log.AppendMeta{}); !errors.Is(err, tt.want) {
					t.Fatalf("Append after failure: %v, want the sticky error", err)
				}
				if err := l.Roll(log.AppendMeta{}); !errors.Is(err, tt.want) {
					t.Fatalf("Roll after failure: %v", err)
				}
				checkPrefix(t, l, &h, len(h.acked)) // reads still work
				l.Close()
				if crash {
					opts.FS = mem.CrashClone()
				}
				l = mustOpen(t, memDir, opts)
				if got := checkPrefix(t, l, &h, len(h.acked)); got != len(h.acked) {
					t.Fatalf("%d batches after restart, want %d", got, len(h.acked))
				}
			})
		}
	}
}

func batchAtPos(data []byte, pos int) []byte {
	n := 12 + int(int32(uint32(data[pos+8])<<24|uint32(data[pos+9])<<16|uint32(data[pos+10])<<8|uint32(data[pos+11])))
	return data[pos : pos+n]
}

func lastDelta(b []byte) int32 {
	return int32(uint32(b[23])<<24 | uint32(b[24])<<16 | uint32(b[25])<<8 | uint32(b[26]))
}

func maxTs(b []byte) int64 {
	var v uint64
	for _, c := range b[35:43] {
		v = v<<8 | uint64(c)
	}
	return int64(v)
}

func indexOf(acked [][]byte, off int64) int {
	for i, b := range acked {
		if baseOffset(b) == off {
			return i
		}
	}
	return -1
}

// nextOffsetAfter returns the offset after the acked batch holding off.
func nextOffsetAfter(acked [][]byte, off int64) int64 {
	for _, b := range acked {
		if next := baseOffset(b) + int64(lastDelta(b)) + 1; off < next {
			return next
		}
	}
	return off + 1
}

// TestOpenLeftovers opens directories left in odd states by crashes or
// damage: leftovers of interrupted rolls and deletions are cleaned up; a
// missing or bad .meta, or a missing segment, is a *CorruptionError.
func TestOpenLeftovers(t *testing.T) {
	tests := []struct {
		name        string
		change      func(m *logtest.MemFS, segs []log.SegmentInfo)
		wantCorrupt bool
		wantEnd     int64 // -1: unchanged
	}{
		{name: "orphan index and meta files", change: func(m *logtest.MemFS, segs []log.SegmentInfo) {
			for _, ext := range []string{".index", ".timeindex", ".meta"} {
				m.SetData(segFile(memDir, 999, ext), []byte("x"))
			}
		}, wantEnd: -1},
		{name: "temporary file", change: func(m *logtest.MemFS, segs []log.SegmentInfo) {
			m.SetData(segFile(memDir, 0, ".index.tmp"), []byte("x"))
		}, wantEnd: -1},
		{name: "unrelated file", change: func(m *logtest.MemFS, segs []log.SegmentInfo) {
			m.SetData(memDir+"/README", []byte("x"))
		}, wantEnd: -1},
		{name: "interrupted roll: empty last segment without meta", change: func(m *logtest.MemFS, segs []log.SegmentInfo) {
			end := segs[len(segs)-1].EndOffset
			m.SetData(segFile(memDir, end, ".log"), nil)
		}, wantEnd: -1},
		{name: "missing meta of a closed segment", change: func(m *logtest.MemFS, segs []log.SegmentInfo) {
			m.Remove(segFile(memDir, segs[0].BaseOffset, ".meta"))
		}, wantCorrupt: true},
		{name: "missing meta of the active segment", change: func(m *logtest.MemFS, segs []log.SegmentInfo) {
			m.Remove(segFile(memDir, segs[len(segs)-1].BaseOffset, ".meta"))
		}, wantCorrupt: true},
		{name: "bad meta", change: func(m *logtest.MemFS, segs []log.SegmentInfo) {
			m.FlipBit(segFile(memDir, segs[1].BaseOffset, ".meta"), 20, 3)
		}, wantCorrupt: true},
		{name: "meta of another segment", change: func(m *logtest.MemFS, segs []log.SegmentInfo) {
			m.SetData(segFile(memDir, segs[1].BaseOffset, ".meta"), m.Data(segFile(memDir, segs[0].BaseOffset, ".meta")))
		}, wantCorrupt: true},
		{name: "missing middle segment", change: func(m *logtest.MemFS, segs []log.SegmentInfo) {
			m.Remove(segFile(memDir, segs[1].BaseOffset, ".log"))
		}, wantCorrupt: true},
		{name: "closed segment cut short", change: func(m *logtest.MemFS, segs []log.SegmentInfo) {
			name := segFile(memDir, segs[0].BaseOffset, ".log")
			d := m.Data(name)
			m.SetData(name, d[:len(d)-1])
		}, wantCorrupt: true},
		{name: "closed segment with a trailing byte", change: func(m *logtest.MemFS, segs []log.SegmentInfo) {
			name := segFile(memDir, segs[0].BaseOffset, ".log")
			m.SetData(name, append(m.Data(name), 0))
		}, wantCorrupt: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := logtest.NewMemFS()
			opts := log.Options{FS: fsys, IndexIntervalBytes: 100}
			l := mustOpen(t, memDir, opts)
			var h history
			if err := workload(l, &h, 20); err != nil {
				t.Fatal(err)
			}
			segs := l.Segments()
			l.Close()
			tt.change(fsys, segs)
			l, err := log.Open(memDir, opts)
			if tt.wantCorrupt {
				if !isCorrupt(err) {
					t.Fatalf("Open: %v, want a CorruptionError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			checkPrefix(t, l, &h, len(h.acked))
			for _, name := range []string{segFile(memDir, 999, ".meta"), segFile(memDir, 0, ".index.tmp")} {
				if fsys.Data(name) != nil {
					t.Fatalf("%s not removed", name)
				}
			}
			if _, err := l.Append(makeBatch(batch{}), log.AppendMeta{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestFailedOrShortRead: a read of segment data that fails, or comes back
// short with or without an error, reaches the reader of the log as an
// error, or (where the bytes it lost were not needed) as the very batches a
// sound read returns; never as other or fewer batches. The fault hits the
// first one, two or three reads of data files, so both the search for the
// first batch and the read of the batches meet it. A restart whose
// recovery reads (of data, index or meta files) fail either refuses to open or keeps every batch, never
// cutting acknowledged ones as a torn tail.
func TestFailedOrShortRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error // nil: a short read that reports no error
		keep int
	}{
		{name: "EIO", err: syscall.EIO},
		{name: "EIO after half", err: syscall.EIO, keep: logtest.KeepHalf},
		{name: "short with EOF", err: io.EOF, keep: logtest.KeepHalf},
		{name: "short without an error", keep: logtest.KeepHalf},
		{name: "one byte without an error", keep: 1},
	} {
		for times := 1; times <= 3; times++ {
			t.Run(fmt.Sprintf("%s x%d", tc.name, times), func(t *testing.T) {
				fsys := logtest.Wrap(logtest.NewMemFS())
				opts := log.Options{FS: fsys}
				l := mustOpen(t, memDir, opts)
				var h history
				if err := workload(l, &h, 12); err != nil {
					t.Fatal(err)
				}
				arm := func(match func(string) bool) {
					fsys.Inject(logtest.Fault{Op: logtest.OpRead, Err: tc.err, Keep: tc.keep, Match: match, Times: times})
				}
				start := l.StartOffset()
				want, err := l.Read(start, 1<<20)
				if err != nil || len(want) == 0 {
					t.Fatalf("Read: %d bytes, %v", len(want), err)
				}
				arm(logtest.HasSuffix(".log"))
				reads := fsys.Reads()
				got, err := l.Read(start, 1<<20)
				if fsys.Reads() == reads {
					t.Fatal("Read read nothing through the file system")
				}
				switch {
				case err != nil && got != nil:
					t.Fatalf("Read returned %d bytes and %v", len(got), err)
				case err != nil && tc.err != nil && tc.err != io.EOF && !errors.Is(err, tc.err):
					t.Fatalf("Read: %v, want %v", err, tc.err)
				case err == nil && !bytes.Equal(got, want):
					t.Fatalf("Read after a faulty read returned %d bytes and no error; a sound read returns %d other bytes", len(got), len(want))
				}
				fsys.Clear()
				checkPrefix(t, l, &h, len(h.acked))
				l.Close()

				arm(nil) // data, index and meta files alike
				if l, err := log.Open(memDir, opts); err == nil {
					defer l.Close()
					if n := checkPrefix(t, l, &h, len(h.acked)); n != len(h.acked) {
						t.Fatalf("opened after a faulty read with %d batches, want %d", n, len(h.acked))
					}
				}
				fsys.Clear()
				l = mustOpen(t, memDir, opts)
				checkPrefix(t, l, &h, len(h.acked))
			})
		}
	}
}
