package log

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
)

// File name extensions of a segment's files.
const (
	extLog       = ".log"
	extIndex     = ".index"
	extTimeIndex = ".timeindex"
	extMeta      = ".meta"
	extTmp       = ".tmp"
)

func segPath(dir string, base int64, ext string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, ext))
}

// parseSegName returns the base offset and extension of a segment file name.
func parseSegName(name string) (base int64, ext string, ok bool) {
	ext = filepath.Ext(name)
	stem := strings.TrimSuffix(name, ext)
	if len(stem) != 20 {
		return 0, "", false
	}
	base, err := strconv.ParseInt(stem, 10, 64)
	if err != nil || base < 0 {
		return 0, "", false
	}
	return base, ext, true
}

// segment is one segment's files. Its fields are set when it is opened or
// created; data is read concurrently by readers and appended to by the
// appender while the segment is active.
type segment struct {
	dir  string
	meta segMeta
	data File

	// idx is the current in-memory index. The appender replaces it as it
	// adds entries to the active segment; a reader that finds it wrong
	// rebuilds it for a closed segment and sets indexDirty.
	idx        atomic.Pointer[index]
	indexDirty atomic.Bool

	// The index files, open for appending only while the segment is active.
	// Used only by the goroutine holding Log.mu.
	offFile, timFile File
}

func (s *segment) base() int64 { return s.meta.base }

func (s *segment) path(ext string) string { return segPath(s.dir, s.meta.base, ext) }

// openIndexFiles opens the index files for appending.
func (s *segment) openIndexFiles(fsys FS) error {
	var err error
	if s.offFile, err = fsys.OpenFile(s.path(extIndex), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err != nil {
		return err
	}
	if s.timFile, err = fsys.OpenFile(s.path(extTimeIndex), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err != nil {
		s.offFile.Close()
		s.offFile = nil
		return err
	}
	return nil
}

// syncIndexFiles syncs the open index files.
func (s *segment) syncIndexFiles() error {
	if s.offFile == nil {
		return nil
	}
	return errors.Join(s.offFile.Sync(), s.timFile.Sync())
}

// closeIndexFiles closes the index files opened for appending.
func (s *segment) closeIndexFiles() error {
	if s.offFile == nil {
		return nil
	}
	err := errors.Join(s.offFile.Close(), s.timFile.Close())
	s.offFile, s.timFile = nil, nil
	return err
}

// close closes every file of the segment.
func (s *segment) close() error {
	return errors.Join(s.closeIndexFiles(), s.data.Close())
}

// writeIndexFiles replaces both index files with ix (write to a temporary
// file, sync, rename). The index files must not be open for appending.
func (s *segment) writeIndexFiles(fsys FS, ix *index) error {
	for _, f := range []struct {
		ext string
		b   []byte
	}{{extIndex, ix.off}, {extTimeIndex, ix.tim}} {
		if err := writeFileAtomic(fsys, s.path(f.ext), f.b); err != nil {
			return fmt.Errorf("write index of segment %d: %w", s.base(), err)
		}
	}
	return nil
}

func writeFileAtomic(fsys FS, name string, b []byte) error {
	tmp := name + extTmp
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, name)
	}
	return err
}

// createSegment creates the files of a new, empty segment: the .meta first
// (written and synced), then the data and index files, then syncs the
// directory. An interrupted creation leaves an orphan .meta or an empty
// segment without .meta, both of which Open removes.
func createSegment(fsys FS, dir string, m segMeta) (*segment, error) {
	s := &segment{dir: dir, meta: m}
	if err := writeMeta(fsys, s.path(extMeta), m); err != nil {
		return nil, fmt.Errorf("create segment %d: %w", m.base, err)
	}
	var err error
	if s.data, err = fsys.OpenFile(s.path(extLog), os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644); err != nil {
		return nil, fmt.Errorf("create segment %d: %w", m.base, err)
	}
	for _, ext := range []string{extIndex, extTimeIndex} {
		if err := fsys.Remove(s.path(ext)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.data.Close()
			return nil, fmt.Errorf("create segment %d: %w", m.base, err)
		}
	}
	if err := s.openIndexFiles(fsys); err != nil {
		s.data.Close()
		return nil, fmt.Errorf("create segment %d: %w", m.base, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		s.close()
		return nil, fmt.Errorf("create segment %d: sync dir: %w", m.base, err)
	}
	s.idx.Store(&index{})
	return s, nil
}

// removeSegmentFiles removes a segment's files, the data file first: a
// crash part way leaves files Open ignores and removes (index and meta files
// without a data file).
func removeSegmentFiles(fsys FS, dir string, base int64) error {
	var errs []error
	for _, ext := range []string{extLog, extIndex, extTimeIndex, extMeta} {
		if err := fsys.Remove(segPath(dir, base, ext)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove segment %d: %w", base, err)
	}
	return nil
}

// readFileIfExists returns a small file's contents, or nil if it does not
// exist or cannot be read (used for index files, which are caches).
func readFileIfExists(fsys FS, name string) []byte {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := readAll(f)
	if err != nil {
		return nil
	}
	return b
}
