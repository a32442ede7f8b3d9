package log_test

import (
	"errors"
	"io/fs"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/log/logtest"
)

// heldFS is a MemFS whose data-file syncs, once armed, make their bytes
// durable and then wait until released: a test can act while an fsync is
// in progress, without a timer.
type heldFS struct {
	*logtest.MemFS
	mu      sync.Mutex
	armed   bool
	fail    error         // returned by the held sync, if set
	entered chan struct{} // closed when a held sync has begun
	release chan struct{} // closed to let it return
	syncs   int
}

func newHeldFS() *heldFS {
	return &heldFS{MemFS: logtest.NewMemFS(), entered: make(chan struct{}), release: make(chan struct{})}
}

func (h *heldFS) OpenFile(name string, flag int, perm fs.FileMode) (log.File, error) {
	f, err := h.MemFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &heldFile{File: f, fs: h}, nil
}

type heldFile struct {
	log.File
	fs *heldFS
}

func (f *heldFile) Sync() error {
	err := f.File.Sync() // durable: what was written when the sync began
	f.fs.mu.Lock()
	f.fs.syncs++
	held := f.fs.armed
	f.fs.armed = false
	f.fs.mu.Unlock()
	if !held {
		return err
	}
	close(f.fs.entered)
	<-f.fs.release
	if f.fs.fail != nil {
		return f.fs.fail
	}
	return err
}

func (h *heldFS) arm(fail error) {
	h.mu.Lock()
	h.armed, h.fail = true, fail
	h.mu.Unlock()
}

func (h *heldFS) syncCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.syncs
}

// appendWithin appends b, failing the test if the append has not returned
// after a generous bound (it would be waiting for the held fsync, which it
// then releases so the log can close).
func appendWithin(t *testing.T, hfs *heldFS, l *log.Log, b []byte, meta log.AppendMeta) (int64, error) {
	t.Helper()
	type result struct {
		off int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		off, err := l.Append(b, meta)
		done <- result{off, err}
	}()
	select {
	case r := <-done:
		return r.off, r.err
	case <-time.After(10 * time.Second):
		close(hfs.release)
		<-done
		t.Fatal("Append waited for a Sync in progress")
		return 0, nil
	}
}

// TestSyncDoesNotBlockAppend: an fsync in progress holds up no Append (a
// snapshot syncs the partition logs while Apply appends), and what was
// appended during it stays unsynced until the next Sync: a power cut
// after the first Sync keeps the first batch only, after the second both.
func TestSyncDoesNotBlockAppend(t *testing.T) {
	hfs := newHeldFS()
	opts := log.Options{SegmentBytes: 1 << 20, Sync: log.SyncNone, FS: hfs}
	l := mustOpen(t, memDir, opts)
	first := makeBatch(batch{payload: payload(1, 100)})
	mustAppend(t, l, first, log.AppendMeta{AppliedIndex: 10})

	hfs.arm(nil)
	synced := make(chan error, 1)
	go func() { synced <- l.Sync() }()
	<-hfs.entered
	second := makeBatch(batch{payload: payload(2, 100)})
	if _, err := appendWithin(t, hfs, l, second, log.AppendMeta{AppliedIndex: 11}); err != nil {
		t.Fatalf("Append during Sync: %v", err)
	}
	close(hfs.release)
	if err := <-synced; err != nil {
		t.Fatalf("Sync: %v", err)
	}

	crash := func() *log.Log {
		o := opts
		o.FS = hfs.CrashClone()
		return mustOpen(t, memDir, o)
	}
	if got := crash().EndOffset(); got != 1 {
		t.Fatalf("after a power cut following the first Sync: end offset %d, want 1 (the batch appended during the fsync is not durable)", got)
	}
	before := hfs.syncCount()
	if err := l.Sync(); err != nil {
		t.Fatalf("second Sync: %v", err)
	}
	if hfs.syncCount() == before {
		t.Fatal("the second Sync did not fsync: the batch appended during the first was taken for synced")
	}
	if got := crash().EndOffset(); got != 2 {
		t.Fatalf("after a power cut following the second Sync: end offset %d, want 2", got)
	}
}

// TestSyncFailureDuringAppend: an fsync that fails while an Append goes
// on is sticky: Sync returns it and every later mutation does too.
func TestSyncFailureDuringAppend(t *testing.T) {
	hfs := newHeldFS()
	l := mustOpen(t, memDir, log.Options{SegmentBytes: 1 << 20, Sync: log.SyncNone, FS: hfs})
	mustAppend(t, l, makeBatch(batch{payload: payload(1, 100)}), log.AppendMeta{AppliedIndex: 10})

	hfs.arm(syscall.EIO)
	synced := make(chan error, 1)
	go func() { synced <- l.Sync() }()
	<-hfs.entered
	if _, err := appendWithin(t, hfs, l, makeBatch(batch{payload: payload(2, 100)}), log.AppendMeta{AppliedIndex: 11}); err != nil {
		t.Fatalf("Append during Sync: %v", err)
	}
	close(hfs.release)
	if err := <-synced; !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync: %v, want EIO", err)
	}
	if _, err := l.Append(makeBatch(batch{payload: payload(3, 100)}), log.AppendMeta{AppliedIndex: 12}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Append after a failed Sync: %v, want the sticky EIO", err)
	}
	if err := l.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync after a failed Sync: %v, want the sticky EIO", err)
	}
}
