package log_test

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/logd-dev/logd/log"
)

// memFS is an in-memory log.FS that injects faults, modelled on
// cockroachdb/pebble vfs/mem_fs.go crash clones: it tracks, for every file,
// the bytes that were synced, and for every directory the entries that were
// synced, so CrashClone can model a power cut.
type memFS struct {
	mu      sync.Mutex
	live    map[string]*memNode // path -> file, as the running process sees it
	durable map[string]*memNode // path -> file, as the directories were last synced

	failWrite     error // the next Write fails with this error ...
	failWriteKeep int   // ... after writing this many of its bytes
	failSync      error // the next Sync fails with this error
	writes, syncs int   // counters

	// ops counts mutating operations; once it reaches dieAt (if > 0) every
	// mutating operation fails with EIO, as if the process had died there.
	ops, dieAt int
}

// dead counts a mutating operation and reports whether it must fail.
// Callers hold m.mu.
func (m *memFS) dead() bool {
	m.ops++
	return m.dieAt > 0 && m.ops >= m.dieAt
}

// DieAt makes the n-th mutating operation from now on, and all later ones,
// fail with EIO.
func (m *memFS) DieAt(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ops, m.dieAt = 0, n
}

// Ops returns the number of mutating operations since DieAt (or creation).
func (m *memFS) Ops() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ops
}

func eio(op, name string) error { return &fs.PathError{Op: op, Path: name, Err: syscall.EIO} }

type memNode struct {
	data   []byte
	synced []byte // the data as of the last Sync; shares data's array until data is rewritten
}

func newMemFS() *memFS {
	return &memFS{live: map[string]*memNode{}, durable: map[string]*memNode{}}
}

// CrashClone returns the file system a power cut would leave: only synced
// directory entries, each file holding only its synced bytes.
func (m *memFS) CrashClone() *memFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := newMemFS()
	for name, n := range m.durable {
		nn := &memNode{data: slices.Clone(n.synced)}
		nn.synced = nn.data
		c.live[name], c.durable[name] = nn, nn
	}
	return c
}

// FailNextWrite makes the next Write write keep bytes, then fail with err.
func (m *memFS) FailNextWrite(err error, keep int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failWrite, m.failWriteKeep = err, keep
}

// FailNextSync makes the next file Sync fail with err (writing nothing).
func (m *memFS) FailNextSync(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failSync = err
}

// FlipBit flips one bit of a file, in both its live and its synced bytes
// (media damage).
func (m *memFS) FlipBit(name string, pos int64, bit uint) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.live[name]
	n.data = slices.Clone(n.data)
	n.data[pos] ^= 1 << bit
	if pos < int64(len(n.synced)) {
		n.synced = slices.Clone(n.synced)
		n.synced[pos] ^= 1 << bit
	}
}

// SetData replaces a file's contents (live and synced).
func (m *memFS) SetData(name string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.live[name]
	if n == nil {
		n = &memNode{}
		m.live[name], m.durable[name] = n, n
	}
	n.data = slices.Clone(b)
	n.synced = n.data
}

// Data returns a copy of a file's live contents, or nil.
func (m *memFS) Data(name string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := m.live[name]; n != nil {
		return slices.Clone(n.data)
	}
	return nil
}

func (m *memFS) OpenFile(name string, flag int, perm fs.FileMode) (log.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.live[name]
	if flag&(os.O_CREATE|os.O_TRUNC) != 0 && m.dead() {
		return nil, eio("open", name)
	}
	switch {
	case n == nil && flag&os.O_CREATE == 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case n != nil && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case n == nil:
		n = &memNode{}
		m.live[name] = n
	case flag&os.O_TRUNC != 0:
		n.data = nil
	}
	return &memFile{fs: m, name: name, node: n, flag: flag}, nil
}

func (m *memFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dead() {
		return eio("remove", name)
	}
	if m.live[name] == nil {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(m.live, name)
	return nil
}

func (m *memFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dead() {
		return eio("rename", oldname)
	}
	n := m.live[oldname]
	if n == nil {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	delete(m.live, oldname)
	m.live[newname] = n
	return nil
}

func (m *memFS) ReadDir(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var names []string
	for name := range m.live {
		if filepath.Dir(name) == filepath.Clean(dir) {
			names = append(names, filepath.Base(name))
		}
	}
	sort.Strings(names)
	return names, nil
}

func (m *memFS) MkdirAll(string, fs.FileMode) error { return nil }

// SyncDir makes the entries of dir durable.
func (m *memFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dead() {
		return eio("syncdir", dir)
	}
	dir = filepath.Clean(dir)
	for name := range m.durable {
		if filepath.Dir(name) == dir {
			delete(m.durable, name)
		}
	}
	for name, n := range m.live {
		if filepath.Dir(name) == dir {
			m.durable[name] = n
		}
	}
	return nil
}

func (m *memFS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.live[name]
	if n == nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return memInfo{name: filepath.Base(name), size: int64(len(n.data))}, nil
}

// Files lists live file names with their sizes, for failure messages.
func (m *memFS) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	for name, n := range m.live {
		fmt.Fprintf(&b, "%s %d\n", filepath.Base(name), len(n.data))
	}
	return b.String()
}

type memFile struct {
	fs     *memFS
	name   string
	node   *memNode
	flag   int
	closed bool
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, os.ErrClosed
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Write appends (the log writes only with O_APPEND).
func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, os.ErrClosed
	}
	f.fs.writes++
	if f.fs.dead() {
		return 0, eio("write", f.name)
	}
	n := len(p)
	var err error
	if f.fs.failWrite != nil {
		n, err = min(f.fs.failWriteKeep, len(p)), &fs.PathError{Op: "write", Path: f.name, Err: f.fs.failWrite}
		f.fs.failWrite = nil
	}
	f.node.data = append(f.node.data, p[:n]...)
	return n, err
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return os.ErrClosed
	}
	f.fs.syncs++
	if f.fs.dead() {
		return eio("fdatasync", f.name)
	}
	if err := f.fs.failSync; err != nil {
		f.fs.failSync = nil
		return &fs.PathError{Op: "fdatasync", Path: f.name, Err: err}
	}
	f.node.synced = f.node.data
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return os.ErrClosed
	}
	if f.fs.dead() {
		return eio("truncate", f.name)
	}
	if size <= int64(len(f.node.data)) {
		// A fresh array: synced must keep the old bytes.
		f.node.data = slices.Clone(f.node.data[:size])
	} else {
		f.node.data = append(f.node.data, make([]byte, size-int64(len(f.node.data)))...)
	}
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return memInfo{name: filepath.Base(f.name), size: int64(len(f.node.data))}, nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return os.ErrClosed
	}
	f.closed = true
	return nil
}

type memInfo struct {
	name string
	size int64
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return 0o644 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }

var (
	_         log.FS = (*memFS)(nil)
	errEIO           = syscall.EIO
	errENOSPC        = syscall.ENOSPC
	_                = bytes.Equal
)
