package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"

	"github.com/logd-dev/logd/internal/failpoint"
)

// Installing segments copied from another replica (snapshot catch-up).
//
// A replica that is behind copies whole segment files (.meta and the first
// Bytes of .log) from a peer: StageSegment writes one into the log
// directory under a temporary name, checking every batch as it streams by,
// and InstallStaged then swaps the staged segments in for the local ones.
// Both work on a directory that is not open (Close the Log first, Open it
// after). Staged files end in ".tmp", so Open removes what an interrupted
// install left behind; InstallStaged removes the replaced segments newest
// first and renames staged ones in oldest first (.meta before .log), so a
// crash at any step leaves a valid, shorter log that a new install extends.

// stagedSuffix marks a staged file; Open removes any file ending in ".tmp".
const stagedSuffix = ".staged" + extTmp

func stagedPath(dir string, base int64, ext string) string {
	return segPath(dir, base, ext) + stagedSuffix
}

// SegmentFiles returns the paths of a segment's data (.log) and .meta files
// in a log directory, for serving them to a replica that installs them.
func SegmentFiles(dir string, base int64) (data, meta string) {
	return segPath(dir, base, extLog), segPath(dir, base, extMeta)
}

// StageSegment copies one segment into dir's staging area: meta is the
// segment's .meta file and data yields the first want.Bytes bytes of its
// .log file. Every batch is checked as it is copied: framing, CRC, and dense
// offsets from want.BaseOffset; the copy must end exactly at want.EndOffset
// after want.Bytes bytes. The staged files are synced before StageSegment
// returns. At most one batch is held in memory. dir must not be open.
func StageSegment(dir string, opts Options, want SegmentInfo, meta []byte, data io.Reader) (err error) {
	opts = opts.withDefaults()
	m, err := decodeMeta(meta)
	if err != nil {
		return &CorruptionError{Segment: want.BaseOffset, Position: -1, Err: err}
	}
	if m.base != want.BaseOffset {
		return corrupt(want.BaseOffset, -1, "staged .meta says base offset %d", m.base)
	}
	if err := opts.FS.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("log: stage segment %d: %w", want.BaseOffset, err)
	}
	if err := writeFileSynced(opts.FS, stagedPath(dir, want.BaseOffset, extMeta), meta); err != nil {
		return fmt.Errorf("log: stage segment %d: %w", want.BaseOffset, err)
	}
	f, err := opts.FS.OpenFile(stagedPath(dir, want.BaseOffset, extLog), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("log: stage segment %d: %w", want.BaseOffset, err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("log: stage segment %d: %w", want.BaseOffset, cerr)
		}
	}()
	var (
		pos  int64
		next = want.BaseOffset
		buf  []byte
		pre  [lengthOverhead]byte
	)
	for pos < want.Bytes {
		if _, err := io.ReadFull(data, pre[:]); err != nil {
			return fmt.Errorf("log: stage segment %d at byte %d: %w", want.BaseOffset, pos, unexpectedEOF(err))
		}
		size := lengthOverhead + int64(int32(binary.BigEndian.Uint32(pre[offBatchLength:])))
		if size < headerSize || size > want.Bytes-pos || size > maxMaxBatchBytes {
			return corrupt(want.BaseOffset, pos, "staged batch of %d bytes (%d left of %d)", size, want.Bytes-pos, want.Bytes)
		}
		buf = slices.Grow(buf[:0], int(size))[:size]
		copy(buf, pre[:])
		if _, err := io.ReadFull(data, buf[lengthOverhead:]); err != nil {
			return fmt.Errorf("log: stage segment %d at byte %d: %w", want.BaseOffset, pos, unexpectedEOF(err))
		}
		h := parseHeader(buf)
		if r := h.checkStored(buf[offMagic], m.compacted); r != "" {
			return corrupt(want.BaseOffset, pos, "staged batch: %s", r)
		}
		if got := batchCRC(buf); got != h.crc {
			return corrupt(want.BaseOffset, pos, "staged batch: CRC mismatch: header %08x, computed %08x", h.crc, got)
		}
		if h.baseOffset != next {
			return corrupt(want.BaseOffset, pos, "staged batch at offset %d, want %d", h.baseOffset, next)
		}
		if _, err := f.Write(buf); err != nil {
			return fmt.Errorf("log: stage segment %d: %w", want.BaseOffset, err)
		}
		pos += size
		next = h.nextOffset()
	}
	if next != want.EndOffset {
		return corrupt(want.BaseOffset, pos, "staged segment ends at offset %d, want %d", next, want.EndOffset)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("log: stage segment %d: sync: %w", want.BaseOffset, err)
	}
	return nil
}

func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// InstallStaged makes dir's segments those in keep (base offsets of local
// segments to keep as they are) followed by the staged segments of the
// bases in staged, oldest first: every other local segment is removed. dir
// must not be open; Open it afterwards (it rebuilds the new segments'
// indexes). The directory is synced before InstallStaged returns.
func InstallStaged(dir string, opts Options, keep, staged []int64) error {
	opts = opts.withDefaults()
	fsys := opts.FS
	for _, base := range staged {
		for _, ext := range []string{extMeta, extLog} {
			if _, err := fsys.Stat(stagedPath(dir, base, ext)); err != nil {
				return fmt.Errorf("log: install segment %d: %w", base, err)
			}
		}
	}
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("log: install: %w", err)
	}
	var local []int64
	for _, name := range names {
		if base, ext, ok := parseSegName(name); ok && ext == extLog && !slices.Contains(keep, base) {
			local = append(local, base)
		}
	}
	// Newest first, data file first (removeSegmentFiles): what remains is
	// always a valid prefix.
	slices.Sort(local)
	for _, base := range slices.Backward(local) {
		if err := removeSegmentFiles(fsys, dir, base); err != nil {
			return fmt.Errorf("log: install: %w", err)
		}
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("log: install: sync dir: %w", err)
	}
	staged = slices.Sorted(slices.Values(staged))
	for _, base := range staged {
		// Stale indexes of a removed segment with this base are gone;
		// indexes are rebuilt by Open.
		for _, ext := range []string{extMeta, extLog} {
			if err := fsys.Rename(stagedPath(dir, base, ext), segPath(dir, base, ext)); err != nil {
				return fmt.Errorf("log: install segment %d: %w", base, err)
			}
		}
		failpoint.Inject("logInstall")
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("log: install: sync dir: %w", err)
	}
	return nil
}

// DiscardStaged removes staged files from dir (Open also does).
func DiscardStaged(dir string, opts Options) error {
	opts = opts.withDefaults()
	names, err := opts.FS.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("log: discard staged: %w", err)
	}
	for _, name := range names {
		if len(name) > len(stagedSuffix) && name[len(name)-len(stagedSuffix):] == stagedSuffix {
			if err := opts.FS.Remove(dir + "/" + name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("log: discard staged: %w", err)
			}
		}
	}
	return nil
}
