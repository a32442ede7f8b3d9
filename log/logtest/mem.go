package logtest

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/logd-dev/logd/log"
)

// MemFS is an in-memory log.FS that models durability: CrashClone returns
// the file system a power cut would leave. Names are cleaned paths;
// directories exist implicitly (MkdirAll does nothing), and a directory's
// entries are the files whose names lie directly in it.
type MemFS struct {
	mu      sync.Mutex
	live    map[string]*memNode // path -> file, as the running process sees it
	durable map[string]*memNode // path -> file, as the directories were last synced
}

// memNode is one file. A rename moves the node, so the durable map can keep
// naming it under its old path until the directory is synced.
type memNode struct {
	data   []byte
	synced []byte // the data as of the last Sync; shares data's array until data is rewritten
}

var _ log.FS = (*MemFS)(nil)

// NewMemFS returns an empty MemFS.
func NewMemFS() *MemFS {
	return &MemFS{live: map[string]*memNode{}, durable: map[string]*memNode{}}
}

// CrashClone returns the file system a power cut would leave now: only the
// directory entries made durable by SyncDir, each file holding only the
// bytes made durable by Sync. The clone shares nothing with m. Files open
// on m stay open on m.
func (m *MemFS) CrashClone() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := NewMemFS()
	for name, n := range m.durable {
		nn := &memNode{data: slices.Clone(n.synced)}
		nn.synced = nn.data
		c.live[name], c.durable[name] = nn, nn
	}
	return c
}

// FlipBit flips one bit of a file, in both its live and its synced bytes
// (media damage). It panics if the file does not exist or is shorter.
func (m *MemFS) FlipBit(name string, pos int64, bit uint) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.live[filepath.Clean(name)]
	if n == nil {
		panic(fmt.Sprintf("logtest: FlipBit of missing file %s", name))
	}
	n.data = slices.Clone(n.data)
	n.data[pos] ^= 1 << (bit % 8)
	if pos < int64(len(n.synced)) {
		n.synced = slices.Clone(n.synced)
		n.synced[pos] ^= 1 << (bit % 8)
	}
}

// SetData replaces a file's contents, live and synced, creating it (with a
// durable directory entry) if needed: a file as found after a crash, torn
// or zero-filled as the test chooses.
func (m *MemFS) SetData(name string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = filepath.Clean(name)
	n := m.live[name]
	if n == nil {
		n = &memNode{}
		m.live[name], m.durable[name] = n, n
	}
	n.data = slices.Clone(b)
	n.synced = n.data
}

// Data returns a copy of a file's live contents, or nil if it does not
// exist.
func (m *MemFS) Data(name string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := m.live[filepath.Clean(name)]; n != nil {
		return slices.Clone(n.data)
	}
	return nil
}

// String lists the live files with their sizes, sorted, one a line: for
// failure messages.
func (m *MemFS) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.live))
	for name := range m.live {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		fmt.Fprintf(&b, "%s %d\n", name, len(m.live[name].data))
	}
	return b.String()
}

// OpenFile opens or creates a file. Only os.O_CREATE, os.O_EXCL and
// os.O_TRUNC change its behaviour; writes always append, as the log's do.
func (m *MemFS) OpenFile(name string, flag int, perm fs.FileMode) (log.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = filepath.Clean(name)
	n := m.live[name]
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
	return &memFile{fs: m, name: name, node: n}, nil
}

// Remove removes a file; the removal is durable after SyncDir of its
// directory.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = filepath.Clean(name)
	if m.live[name] == nil {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(m.live, name)
	return nil
}

// Rename renames a file, replacing newname; durable after SyncDir.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	n := m.live[oldname]
	if n == nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrNotExist}
	}
	delete(m.live, oldname)
	m.live[newname] = n
	return nil
}

// ReadDir returns the names of the files directly in dir, sorted.
func (m *MemFS) ReadDir(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = filepath.Clean(dir)
	var names []string
	for name := range m.live {
		if filepath.Dir(name) == dir {
			names = append(names, filepath.Base(name))
		}
	}
	sort.Strings(names)
	return names, nil
}

// MkdirAll does nothing: directories exist implicitly.
func (m *MemFS) MkdirAll(string, fs.FileMode) error { return nil }

// SyncDir makes the entries of dir durable: the files now in it survive a
// crash, those removed or renamed away no longer come back.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
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

// Stat returns a file's name and size.
func (m *MemFS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = filepath.Clean(name)
	n := m.live[name]
	if n == nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return memInfo{name: filepath.Base(name), size: int64(len(n.data))}, nil
}

// memFile is an open file of a MemFS. It stays bound to its node: after a
// rename or removal it reads and writes the same data, as on POSIX.
type memFile struct {
	fs     *MemFS
	name   string
	node   *memNode
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

// Write appends p.
func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, os.ErrClosed
	}
	f.node.data = append(f.node.data, p...)
	return len(p), nil
}

// Sync makes the file's bytes durable.
func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return os.ErrClosed
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
