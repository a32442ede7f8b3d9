package faults

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	waltypes "github.com/hashicorp/raft-wal/types"
)

// WALPowerCut models a power cut of Raft's log when raft-wal keeps it
// (replication/raftstore/logstore.go), through raft-wal's own file system seam
// (types.VFS): it wraps the VFS its segment files are written through and
// journals, before each write, the extent it covers, and after each Sync
// that the file's writes so far are durable. OpenWALPowerCut, at the next
// start, replays the journal: the extents written after a file's last
// Sync are zeroed (raft-wal preallocates its segment files, so zeros are
// what a disk that never got the write holds there), and a file created
// and never synced is removed (raft-wal fsyncs a new file's directory on
// its first Sync). A SIGKILL followed by a restart is then a power cut of
// the WAL, as PowerCutFS makes one of the partition logs.
//
// raft-wal's metadata file (wal-meta.db, bbolt, which fsyncs every
// commit) is not written through the seam and is not modelled; removals
// are durable at once, as in PowerCutFS.
type WALPowerCut struct {
	mu      sync.Mutex
	journal *os.File
	err     error // a failed journal write: sticky
	// DropSyncs, if set, journals no Sync: every write is lost at the
	// next cut, as on a disk that ignores fsync. Tests use it to show the
	// cut is not inert.
	DropSyncs bool
}

// WALCutReport says what OpenWALPowerCut cut.
type WALCutReport struct {
	// Files is the number of files removed because they were never
	// synced.
	Files int
	// Extents and Bytes are the unsynced writes zeroed, and their bytes.
	Extents int
	Bytes   int64
}

// OpenWALPowerCut applies the cut the journal file describes, if it
// exists, and returns a WALPowerCut that journals afresh there. Call Close
// when the process stops cleanly.
func OpenWALPowerCut(journal string) (*WALPowerCut, WALCutReport, error) {
	rep, err := cutWALFromJournal(journal)
	if err != nil {
		return nil, rep, fmt.Errorf("wal power cut from %s: %w", journal, err)
	}
	if err := os.MkdirAll(filepath.Dir(journal), 0o755); err != nil {
		return nil, rep, fmt.Errorf("wal power-cut journal: %w", err)
	}
	f, err := os.OpenFile(journal, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, rep, fmt.Errorf("wal power-cut journal: %w", err)
	}
	return &WALPowerCut{journal: f}, rep, nil
}

// Close closes the journal.
func (w *WALPowerCut) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.journal.Close()
}

// Wrap returns inner with every file it creates or opens for writing
// journaled.
func (w *WALPowerCut) Wrap(inner waltypes.VFS) waltypes.VFS { return &walCutVFS{VFS: inner, pc: w} }

// log appends a journal line; the first failure sticks.
func (w *WALPowerCut) log(fields ...string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if _, err := w.journal.WriteString(strings.Join(fields, " ") + "\n"); err != nil {
		w.err = fmt.Errorf("wal power-cut journal: %w", err)
	}
	return w.err
}

type walCutVFS struct {
	waltypes.VFS
	pc *WALPowerCut
}

func (v *walCutVFS) Create(dir, name string, size uint64) (waltypes.WritableFile, error) {
	path := filepath.Join(dir, name)
	if err := v.pc.log("create", strconv.Quote(path)); err != nil {
		return nil, err
	}
	f, err := v.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return &walCutFile{WritableFile: f, pc: v.pc, path: path}, nil
}

func (v *walCutVFS) OpenWriter(dir, name string) (waltypes.WritableFile, error) {
	f, err := v.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return &walCutFile{WritableFile: f, pc: v.pc, path: filepath.Join(dir, name)}, nil
}

type walCutFile struct {
	waltypes.WritableFile
	pc   *WALPowerCut
	path string
}

func (f *walCutFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.pc.log("write", strconv.Quote(f.path), strconv.FormatInt(off, 10), strconv.Itoa(len(p))); err != nil {
		return 0, err
	}
	return f.WritableFile.WriteAt(p, off)
}

func (f *walCutFile) Sync() error {
	if err := f.WritableFile.Sync(); err != nil {
		return err
	}
	if f.pc.DropSyncs {
		return nil
	}
	return f.pc.log("sync", strconv.Quote(f.path))
}

// walCutState is what the journal says of one file.
type walCutState struct {
	created bool       // created and never synced
	pending [][2]int64 // offset, length of writes since the last sync
}

// cutWALFromJournal applies the cut journal describes (see WALPowerCut).
func cutWALFromJournal(journal string) (WALCutReport, error) {
	var rep WALCutReport
	jf, err := os.Open(journal)
	if errors.Is(err, fs.ErrNotExist) {
		return rep, nil
	}
	if err != nil {
		return rep, err
	}
	defer jf.Close()
	files := map[string]*walCutState{}
	var order []string
	st := func(path string) *walCutState {
		s, ok := files[path]
		if !ok {
			s = &walCutState{}
			files[path] = s
			order = append(order, path)
		}
		return s
	}
	sc := bufio.NewScanner(jf)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue // a line the process died writing
		}
		path, err := strconv.Unquote(fields[1])
		if err != nil {
			continue
		}
		switch {
		case fields[0] == "create":
			s := st(path)
			s.created, s.pending = true, nil
		case fields[0] == "sync":
			s := st(path)
			s.created, s.pending = false, nil
		case fields[0] == "write" && len(fields) == 4:
			off, err1 := strconv.ParseInt(fields[2], 10, 64)
			n, err2 := strconv.ParseInt(fields[3], 10, 64)
			if err1 != nil || err2 != nil {
				continue
			}
			s := st(path)
			s.pending = append(s.pending, [2]int64{off, n})
		}
	}
	if err := sc.Err(); err != nil {
		return rep, err
	}
	for _, path := range order {
		s := files[path]
		if s.created {
			err := os.Remove(path)
			if err == nil {
				rep.Files++
			} else if !errors.Is(err, fs.ErrNotExist) {
				return rep, err
			}
			continue
		}
		if len(s.pending) == 0 {
			continue
		}
		n, err := zeroExtents(path, s.pending)
		if err != nil {
			return rep, err
		}
		rep.Extents += len(s.pending)
		rep.Bytes += n
	}
	return rep, nil
}

// zeroExtents zeroes the extents of the file at path within its current
// size, syncs it, and returns how many bytes it zeroed.
func zeroExtents(path string, extents [][2]int64) (int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil // removed since (removals are durable at once)
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, e := range extents {
		off, n := e[0], min(e[1], fi.Size()-e[0])
		if n <= 0 {
			continue
		}
		if _, err := f.WriteAt(make([]byte, n), off); err != nil {
			return total, err
		}
		total += n
	}
	return total, f.Sync()
}
