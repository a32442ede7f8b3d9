package log

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
)

// File is the part of an open file the log uses. The log opens data and
// index files with os.O_APPEND and only appends with Write; it reads with
// ReadAt, possibly from several goroutines while one goroutine writes.
type File interface {
	io.ReaderAt
	io.Writer
	// Sync makes the written data durable (fdatasync on Linux).
	Sync() error
	Truncate(size int64) error
	Stat() (fs.FileInfo, error)
	Close() error
}

// readFull reads len(p) bytes of f at pos. A read that returns fewer is
// an error even when f reports none (io.ErrUnexpectedEOF): io.ReaderAt
// promises one, but the bytes it did not fill must never pass for data.
// The n = len(p) bytes of a read that ends the file may come with io.EOF.
func readFull(f io.ReaderAt, p []byte, pos int64) error {
	n, err := f.ReadAt(p, pos)
	switch {
	case n == len(p) && (err == nil || err == io.EOF):
		return nil
	case err == nil || err == io.EOF:
		return fmt.Errorf("short read of %d bytes at %d, want %d: %w", n, pos, len(p), io.ErrUnexpectedEOF)
	}
	return err
}

// FS is the file system seam: the OS by default, in tests an in-memory or
// fault-injecting one (package logtest). Names are full paths.
type FS interface {
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	Remove(name string) error
	Rename(oldname, newname string) error
	// ReadDir returns the names (not paths) of the entries of dir, sorted.
	ReadDir(dir string) ([]string, error)
	MkdirAll(dir string, perm fs.FileMode) error
	// SyncDir makes the directory's entries (creations, removals, renames)
	// durable.
	SyncDir(dir string) error
	Stat(name string) (fs.FileInfo, error)
}

// OSFS is the operating system's file system.
type OSFS struct{}

var _ FS = OSFS{}

// OpenFile opens a file with os.OpenFile.
func (OSFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Remove removes a file.
func (OSFS) Remove(name string) error { return os.Remove(name) }

// Rename renames a file.
func (OSFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// ReadDir lists a directory's entry names, sorted.
func (OSFS) ReadDir(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	sort.Strings(names)
	return names, err
}

// MkdirAll creates a directory and its parents.
func (OSFS) MkdirAll(dir string, perm fs.FileMode) error { return os.MkdirAll(dir, perm) }

// SyncDir fsyncs a directory.
func (OSFS) SyncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Stat stats a file.
func (OSFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

// osFile is an *os.File whose Sync is fdatasync where available.
type osFile struct{ *os.File }

func (f osFile) Sync() error { return datasync(f.File) }
