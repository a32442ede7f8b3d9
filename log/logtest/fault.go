package logtest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/logd-dev/logd/log"
)

// Op is a kind of file operation a Fault applies to.
type Op int

// The operations a Fault can fail.
const (
	// OpWrite is File.Write.
	OpWrite Op = iota + 1
	// OpSync is File.Sync (fsync or fdatasync).
	OpSync
	// OpSyncDir is FS.SyncDir.
	OpSyncDir
	// OpRead is File.ReadAt.
	OpRead
)

func (o Op) String() string {
	switch o {
	case OpWrite:
		return "write"
	case OpSync:
		return "fdatasync"
	case OpSyncDir:
		return "syncdir"
	case OpRead:
		return "read"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// KeepHalf as Fault.Keep makes a failing write store, or a failing read
// return, the first half of its bytes.
const KeepHalf = -1

// Fault is one injected failure.
type Fault struct {
	// Op is the operation that fails.
	Op Op
	// Err is the error it fails with, e.g. syscall.EIO or syscall.ENOSPC;
	// it is returned wrapped in an *fs.PathError. For a read, nil makes a
	// short read that reports no error (see Keep).
	Err error
	// Keep is, for a write, how many of its bytes reach the file before the
	// error (a torn write, as when a disk fills mid-write); for a read, how
	// many bytes it returns (a read cut short by a media error, or by a
	// file shorter than the reader thinks); KeepHalf for half of them. A
	// failing sync writes nothing durable.
	Keep int
	// Match selects the files (full names) the fault applies to; nil
	// matches every file.
	Match func(name string) bool
	// Times is how many operations fail; 0 means every matching one until
	// Clear.
	Times int
}

// HasSuffix returns a Fault.Match selecting names ending in suffix, e.g.
// ".log" for segment data files.
func HasSuffix(suffix string) func(string) bool {
	return func(name string) bool { return strings.HasSuffix(name, suffix) }
}

// FaultFS wraps a log.FS and injects failures into it: failing and torn
// writes, failing and slow syncs, failing and short reads, a process that
// dies at a chosen operation.
// It also tracks how much of each file it opened was synced, so
// DropUnsynced can model a power cut over a file system that cannot be
// cloned (the operating system's).
type FaultFS struct {
	inner log.FS

	mu     sync.Mutex
	faults []Fault
	// syncDelay is slept before every file and directory sync.
	syncDelay time.Duration
	// ops counts mutating operations; once it reaches dieAt (if > 0) every
	// mutating operation fails with EIO, as if the process had died there.
	ops, dieAt           int
	writes, syncs, reads int
	// synced is each tracked file's size at its last sync; frozen stops
	// syncs from counting (CutPower).
	synced map[string]int64
	frozen bool
}

var _ log.FS = (*FaultFS)(nil)

// Wrap returns a FaultFS over inner that injects nothing until told to.
func Wrap(inner log.FS) *FaultFS {
	return &FaultFS{inner: inner, synced: map[string]int64{}}
}

// Inject adds faults; the first one that matches an operation applies.
func (f *FaultFS) Inject(faults ...Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, faults...)
}

// FailNextWrite makes the next write store keep bytes (at most all of
// them), then fail with err.
func (f *FaultFS) FailNextWrite(err error, keep int) {
	f.Inject(Fault{Op: OpWrite, Err: err, Keep: keep, Times: 1})
}

// FailNextRead makes the next file read return keep bytes (at most all it
// asked for), then fail with err.
func (f *FaultFS) FailNextRead(err error, keep int) {
	f.Inject(Fault{Op: OpRead, Err: err, Keep: keep, Times: 1})
}

// ShortNextRead makes the next file read return only keep bytes (at most
// all it asked for) and no error: a file that breaks io.ReaderAt's
// contract, for checking that a reader does not trust a read's count
// blindly.
func (f *FaultFS) ShortNextRead(keep int) {
	f.Inject(Fault{Op: OpRead, Keep: keep, Times: 1})
}

// FailNextSync makes the next file sync fail with err, syncing nothing.
func (f *FaultFS) FailNextSync(err error) {
	f.Inject(Fault{Op: OpSync, Err: err, Times: 1})
}

// Clear removes every injected fault and the death of DieAt.
func (f *FaultFS) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults, f.dieAt = nil, 0
}

// SetSyncDelay makes every file and directory sync take d longer (a slow or
// overloaded disk); 0 removes the delay.
func (f *FaultFS) SetSyncDelay(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.syncDelay = d
}

// DieAt makes the n-th mutating operation from now on, and every later one,
// fail with EIO, as if the process had died there; n = 0 only restarts the
// count (Ops). Mutating operations are opens that create or truncate,
// writes, syncs, truncations, removals, renames and directory syncs.
func (f *FaultFS) DieAt(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops, f.dieAt = 0, n
}

// Ops returns the number of mutating operations since the last DieAt (or
// Wrap).
func (f *FaultFS) Ops() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops
}

// Writes, Syncs and Reads return how many file writes, file syncs and file
// reads were asked for, failed ones included.
func (f *FaultFS) Writes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes
}

// Syncs: see Writes.
func (f *FaultFS) Syncs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncs
}

// Reads: see Writes.
func (f *FaultFS) Reads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

// CutPower marks the moment of a power cut: syncs from now on (a clean
// shutdown's) no longer count for DropUnsynced.
func (f *FaultFS) CutPower() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen = true
}

// DropUnsynced truncates every file opened through f that still exists to
// its size at its last counted sync (its size when first opened, if it
// existed before and was not truncated), as a power cut would, and returns
// how many bytes it dropped. Directory entries are taken as durable: over
// the operating system's file system other code may share the directory,
// so only file contents are modelled; use MemFS.CrashClone for the whole
// model. Call it with every file closed, then open a fresh FaultFS (or the
// inner FS) as the restarted process.
func (f *FaultFS) DropUnsynced() (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var dropped int64
	for name, size := range f.synced {
		st, err := f.inner.Stat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed: a roll's or retention's cleanup
		}
		if err != nil {
			return dropped, err
		}
		if st.Size() <= size {
			continue
		}
		file, err := f.inner.OpenFile(name, os.O_RDWR, 0)
		if err != nil {
			return dropped, err
		}
		err = file.Truncate(size)
		if cerr := file.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return dropped, err
		}
		dropped += st.Size() - size
	}
	return dropped, nil
}

// mutate counts a mutating operation and returns EIO if the process is
// dead. Callers hold f.mu.
func (f *FaultFS) mutate(op, name string) error {
	f.ops++
	if f.dieAt > 0 && f.ops >= f.dieAt {
		return &fs.PathError{Op: op, Path: name, Err: syscall.EIO}
	}
	return nil
}

// fault returns the injected fault for op on name, using up one of its
// times, or ok false. Callers hold f.mu.
func (f *FaultFS) fault(op Op, name string) (Fault, bool) {
	for i, ft := range f.faults {
		if ft.Op != op || (ft.Match != nil && !ft.Match(name)) {
			continue
		}
		if ft.Times > 0 {
			if f.faults[i].Times--; f.faults[i].Times == 0 {
				f.faults = slices.Delete(f.faults, i, i+1)
			}
		}
		return ft, true
	}
	return Fault{}, false
}

// OpenFile opens a file of the inner FS.
func (f *FaultFS) OpenFile(name string, flag int, perm fs.FileMode) (log.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if flag&(os.O_CREATE|os.O_TRUNC) != 0 {
		if err := f.mutate("open", name); err != nil {
			return nil, err
		}
	}
	file, err := f.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	switch _, tracked := f.synced[name]; {
	case flag&os.O_TRUNC != 0:
		f.synced[name] = 0
	case !tracked:
		// There before it was opened here: durable as far as f knows.
		// A fresh file's size is 0.
		st, err := file.Stat()
		if err != nil {
			file.Close()
			return nil, err
		}
		f.synced[name] = st.Size()
	}
	return &faultFile{File: file, fs: f, name: name}, nil
}

// Remove removes a file of the inner FS.
func (f *FaultFS) Remove(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.mutate("remove", name); err != nil {
		return err
	}
	if err := f.inner.Remove(name); err != nil {
		return err
	}
	delete(f.synced, name)
	return nil
}

// Rename renames a file of the inner FS.
func (f *FaultFS) Rename(oldname, newname string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.mutate("rename", oldname); err != nil {
		return err
	}
	if err := f.inner.Rename(oldname, newname); err != nil {
		return err
	}
	if size, ok := f.synced[oldname]; ok {
		f.synced[newname] = size
		delete(f.synced, oldname)
	} else {
		delete(f.synced, newname)
	}
	return nil
}

// ReadDir lists a directory of the inner FS.
func (f *FaultFS) ReadDir(dir string) ([]string, error) { return f.inner.ReadDir(dir) }

// MkdirAll creates directories in the inner FS.
func (f *FaultFS) MkdirAll(dir string, perm fs.FileMode) error { return f.inner.MkdirAll(dir, perm) }

// Stat stats a file of the inner FS.
func (f *FaultFS) Stat(name string) (fs.FileInfo, error) { return f.inner.Stat(name) }

// SyncDir syncs a directory of the inner FS, after the sync delay.
func (f *FaultFS) SyncDir(dir string) error {
	f.mu.Lock()
	err := f.mutate("syncdir", dir)
	ft, failed := f.fault(OpSyncDir, dir)
	delay := f.syncDelay
	f.mu.Unlock()
	if err != nil {
		return err
	}
	time.Sleep(delay)
	if failed {
		return &fs.PathError{Op: "syncdir", Path: dir, Err: ft.Err}
	}
	return f.inner.SyncDir(dir)
}

// faultFile is a file opened through a FaultFS.
type faultFile struct {
	log.File
	fs   *FaultFS
	name string
}

// Write writes p, or the part a fault keeps.
func (f *faultFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	f.fs.writes++
	err := f.fs.mutate("write", f.name)
	ft, failed := f.fs.fault(OpWrite, f.name)
	f.fs.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if !failed {
		return f.File.Write(p)
	}
	keep := ft.Keep
	if keep < 0 {
		keep = len(p) / 2
	}
	n, err := f.File.Write(p[:min(keep, len(p))])
	if err == nil {
		err = &fs.PathError{Op: "write", Path: f.name, Err: ft.Err}
	}
	return n, err
}

// ReadAt reads into p at off, or the part a fault keeps. Reads mutate
// nothing: they neither count towards DieAt nor fail once the process is
// dead.
func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	f.fs.reads++
	ft, failed := f.fs.fault(OpRead, f.name)
	f.fs.mu.Unlock()
	if !failed {
		return f.File.ReadAt(p, off)
	}
	keep := ft.Keep
	if keep < 0 {
		keep = len(p) / 2
	}
	n, err := f.File.ReadAt(p[:min(keep, len(p))], off)
	if err != nil {
		return n, err
	}
	if ft.Err == nil {
		return n, nil
	}
	return n, &fs.PathError{Op: "read", Path: f.name, Err: ft.Err}
}

// Sync syncs the file after the sync delay, unless a fault fails it.
func (f *faultFile) Sync() error {
	f.fs.mu.Lock()
	f.fs.syncs++
	err := f.fs.mutate("fdatasync", f.name)
	ft, failed := f.fs.fault(OpSync, f.name)
	delay := f.fs.syncDelay
	f.fs.mu.Unlock()
	if err != nil {
		return err
	}
	// What the sync makes durable is what was written when it began: a
	// write racing it (the log syncs without its lock) stays unsynced.
	st, err := f.File.Stat()
	if err != nil {
		return err
	}
	time.Sleep(delay)
	if failed {
		return &fs.PathError{Op: "fdatasync", Path: f.name, Err: ft.Err}
	}
	if err := f.File.Sync(); err != nil {
		return err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if _, tracked := f.fs.synced[f.name]; tracked && !f.fs.frozen {
		f.fs.synced[f.name] = max(f.fs.synced[f.name], st.Size())
	}
	return nil
}

// Truncate truncates the file. Bytes written after a truncation below the
// synced size are unsynced until the next sync.
func (f *faultFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.mutate("truncate", f.name); err != nil {
		return err
	}
	if err := f.File.Truncate(size); err != nil {
		return err
	}
	if synced, tracked := f.fs.synced[f.name]; tracked && size < synced && !f.fs.frozen {
		f.fs.synced[f.name] = size
	}
	return nil
}
