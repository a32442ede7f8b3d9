package logtest_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/log/logtest"
)

func create(t *testing.T, fsys log.FS, name string) log.File {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func write(t *testing.T, f log.File, s string) {
	t.Helper()
	if _, err := f.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func sync(t *testing.T, f log.File) {
	t.Helper()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func content(t *testing.T, fsys log.FS, name string) string {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return string(b)
}

func names(t *testing.T, fsys log.FS, dir string) []string {
	t.Helper()
	n, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMemCrashClone: a power cut keeps synced bytes and synced directory
// entries only.
func TestMemCrashClone(t *testing.T) {
	m := logtest.NewMemFS()
	a := create(t, m, "/d/a")
	write(t, a, "synced")
	sync(t, a)
	write(t, a, "+unsynced")
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	b := create(t, m, "/d/b") // never made durable by SyncDir
	write(t, b, "x")
	sync(t, b)

	c := m.CrashClone()
	if got := names(t, c, "/d"); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after the crash /d holds %v, want [a]", got)
	}
	if got := content(t, c, "/d/a"); got != "synced" {
		t.Fatalf("a after the crash: %q, want the synced bytes", got)
	}
	if got := content(t, m, "/d/a"); got != "synced+unsynced" {
		t.Fatalf("the original changed: %q", got)
	}

	// A rename or removal not followed by SyncDir is undone by a crash.
	if err := m.Rename("/d/a", "/d/a2"); err != nil {
		t.Fatal(err)
	}
	if got := names(t, m.CrashClone(), "/d"); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("unsynced rename survived a crash: %v", got)
	}
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove("/d/a2"); err != nil {
		t.Fatal(err)
	}
	if got := names(t, m.CrashClone(), "/d"); !slices.Equal(got, []string{"a2", "b"}) {
		t.Fatalf("after a synced rename and an unsynced removal: %v, want [a2 b]", got)
	}
	// Truncation is undone too until the next sync.
	sync(t, a)
	if err := a.Truncate(2); err != nil {
		t.Fatal(err)
	}
	if got := content(t, m.CrashClone(), "/d/a2"); got != "synced+unsynced" {
		t.Fatalf("unsynced truncation survived a crash: %q", got)
	}
}

func TestMemDamage(t *testing.T) {
	m := logtest.NewMemFS()
	f := create(t, m, "/d/f")
	write(t, f, "ab")
	sync(t, f)
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	m.FlipBit("/d/f", 1, 0)
	if got := string(m.Data("/d/f")); got != "ac" {
		t.Fatalf("after FlipBit: %q", got)
	}
	if got := content(t, m.CrashClone(), "/d/f"); got != "ac" {
		t.Fatal("a flipped bit is not durable")
	}
	m.SetData("/d/g", []byte("torn"))
	if got := content(t, m.CrashClone(), "/d/g"); got != "torn" {
		t.Fatalf("SetData is not durable: %q", got)
	}
	if m.Data("/d/none") != nil {
		t.Fatal("Data of a missing file")
	}
	if _, err := m.OpenFile("/d/f", os.O_CREATE|os.O_EXCL, 0); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("O_EXCL on an existing file: %v", err)
	}
	if _, err := m.Stat("/d/none"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat of a missing file: %v", err)
	}
}

// TestFaults covers each injected failure over a MemFS and over the
// operating system.
func TestFaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		inner func(t *testing.T) (log.FS, string)
	}{
		{"mem", func(t *testing.T) (log.FS, string) { return logtest.NewMemFS(), "/d" }},
		{"os", func(t *testing.T) (log.FS, string) { return log.OSFS{}, t.TempDir() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Run("torn write", func(t *testing.T) {
				inner, dir := tc.inner(t)
				f := logtest.Wrap(inner)
				file := create(t, f, filepath.Join(dir, "a"))
				f.FailNextWrite(syscall.ENOSPC, 3)
				n, err := file.Write([]byte("abcdef"))
				if n != 3 || !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("Write = %d, %v; want 3, ENOSPC", n, err)
				}
				var pe *fs.PathError
				if !errors.As(err, &pe) || pe.Op != "write" {
					t.Fatalf("%v is not a write *fs.PathError", err)
				}
				write(t, file, "gh") // only the next write failed
				if got := content(t, inner, filepath.Join(dir, "a")); got != "abcgh" {
					t.Fatalf("file holds %q, want abcgh", got)
				}
				if f.Writes() != 2 {
					t.Fatalf("Writes() = %d", f.Writes())
				}
			})
			t.Run("failing sync", func(t *testing.T) {
				inner, dir := tc.inner(t)
				f := logtest.Wrap(inner)
				file := create(t, f, filepath.Join(dir, "a"))
				write(t, file, "x")
				f.FailNextSync(syscall.EIO)
				if err := file.Sync(); !errors.Is(err, syscall.EIO) {
					t.Fatalf("Sync: %v, want EIO", err)
				}
				sync(t, file)
				if f.Syncs() != 2 {
					t.Fatalf("Syncs() = %d", f.Syncs())
				}
			})
			t.Run("failing and short reads", func(t *testing.T) {
				inner, dir := tc.inner(t)
				f := logtest.Wrap(inner)
				file := create(t, f, filepath.Join(dir, "a"))
				write(t, file, "abcdef")
				for _, rc := range []struct {
					name  string
					arm   func()
					n     int
					err   error // nil: no error
					bytes string
				}{
					{name: "EIO", arm: func() { f.FailNextRead(syscall.EIO, 0) }, err: syscall.EIO},
					{name: "EIO after two bytes", arm: func() { f.FailNextRead(syscall.EIO, 2) }, n: 2, err: syscall.EIO, bytes: "ab"},
					{name: "cut short at half", arm: func() { f.FailNextRead(io.ErrUnexpectedEOF, logtest.KeepHalf) }, n: 3, err: io.ErrUnexpectedEOF, bytes: "abc"},
					{name: "short without an error", arm: func() { f.ShortNextRead(4) }, n: 4, bytes: "abcd"},
					{name: "the next read is whole", arm: func() {}, n: 6, bytes: "abcdef"},
				} {
					rc.arm()
					p := make([]byte, 6)
					n, err := file.ReadAt(p, 0)
					if n != rc.n || string(p[:n]) != rc.bytes || (rc.err == nil) != (err == nil) || (rc.err != nil && !errors.Is(err, rc.err)) {
						t.Fatalf("%s: ReadAt = %d %q, %v; want %d %q, %v", rc.name, n, p[:n], err, rc.n, rc.bytes, rc.err)
					}
					var pe *fs.PathError
					if err != nil && (!errors.As(err, &pe) || pe.Op != "read") {
						t.Fatalf("%s: %v is not a read *fs.PathError", rc.name, err)
					}
				}
				if f.Reads() != 5 {
					t.Fatalf("Reads() = %d", f.Reads())
				}
				// Only matching files fail.
				other := create(t, f, filepath.Join(dir, "b.index"))
				write(t, other, "xy")
				f.Inject(logtest.Fault{Op: logtest.OpRead, Err: syscall.EIO, Match: logtest.HasSuffix(".log")})
				if _, err := other.ReadAt(make([]byte, 2), 0); err != nil {
					t.Fatalf("read of an unmatched file: %v", err)
				}
				f.Clear()
			})
			t.Run("persistent fault on matching files", func(t *testing.T) {
				inner, dir := tc.inner(t)
				f := logtest.Wrap(inner)
				data, index := create(t, f, filepath.Join(dir, "0.log")), create(t, f, filepath.Join(dir, "0.index"))
				f.Inject(logtest.Fault{Op: logtest.OpWrite, Err: syscall.ENOSPC, Keep: logtest.KeepHalf, Match: logtest.HasSuffix(".log")},
					logtest.Fault{Op: logtest.OpSyncDir, Err: syscall.EIO})
				for range 2 {
					if _, err := data.Write([]byte("abcd")); !errors.Is(err, syscall.ENOSPC) {
						t.Fatalf("data write: %v", err)
					}
				}
				write(t, index, "i")
				if got := content(t, inner, filepath.Join(dir, "0.log")); got != "abab" {
					t.Fatalf("data file holds %q, want half of each write", got)
				}
				if err := f.SyncDir(dir); !errors.Is(err, syscall.EIO) {
					t.Fatalf("SyncDir: %v", err)
				}
				f.Clear()
				write(t, data, "ok")
				if err := f.SyncDir(dir); err != nil {
					t.Fatal(err)
				}
			})
			t.Run("death", func(t *testing.T) {
				inner, dir := tc.inner(t)
				f := logtest.Wrap(inner)
				file := create(t, f, filepath.Join(dir, "a"))
				f.DieAt(3)
				write(t, file, "1")
				sync(t, file)
				if _, err := file.Write([]byte("2")); !errors.Is(err, syscall.EIO) {
					t.Fatalf("third operation: %v, want EIO", err)
				}
				if err := f.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "b")); !errors.Is(err, syscall.EIO) {
					t.Fatalf("operation after death: %v, want EIO", err)
				}
				if _, err := f.OpenFile(filepath.Join(dir, "a"), os.O_RDONLY, 0); err != nil {
					t.Fatalf("a read-only open is not a mutation: %v", err)
				}
				if f.Ops() != 4 {
					t.Fatalf("Ops() = %d, want 4", f.Ops())
				}
				if got := content(t, inner, filepath.Join(dir, "a")); got != "1" {
					t.Fatalf("file holds %q", got)
				}
			})
			t.Run("slow sync", func(t *testing.T) {
				inner, dir := tc.inner(t)
				f := logtest.Wrap(inner)
				file := create(t, f, filepath.Join(dir, "a"))
				f.SetSyncDelay(50 * time.Millisecond)
				start := time.Now()
				sync(t, file)
				if err := f.SyncDir(dir); err != nil {
					t.Fatal(err)
				}
				if d := time.Since(start); d < 100*time.Millisecond {
					t.Fatalf("two syncs took %v, want at least 100ms", d)
				}
			})
			t.Run("power cut", func(t *testing.T) {
				inner, dir := tc.inner(t)
				old := filepath.Join(dir, "old")
				pre := create(t, inner, old) // there before the FaultFS
				write(t, pre, "kept")
				f := logtest.Wrap(inner)
				a, b := create(t, f, filepath.Join(dir, "a")), create(t, f, old)
				write(t, a, "synced")
				sync(t, a)
				write(t, a, "+lost")
				write(t, b, "+lost")
				f.CutPower()
				sync(t, a) // a clean shutdown's sync, after the cut
				dropped, err := f.DropUnsynced()
				if err != nil {
					t.Fatal(err)
				}
				if dropped != 10 {
					t.Fatalf("dropped %d bytes, want 10", dropped)
				}
				if got := content(t, inner, filepath.Join(dir, "a")); got != "synced" {
					t.Fatalf("a holds %q after the cut", got)
				}
				if got := content(t, inner, old); got != "kept" {
					t.Fatalf("old holds %q after the cut", got)
				}
			})
		})
	}
}
