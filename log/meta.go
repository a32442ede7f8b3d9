package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
)

// The .meta sidecar of a segment, written once when the segment is created:
//
//	0  magic "LGDM"
//	4  version uint32 (1)
//	8  base offset int64
//	16 base applied index uint64
//	24 creation time int64 (Unix nanoseconds)
//	32 CRC-32C of bytes 0..32
//
// A segment written by compaction (compact.go) has a version 2 .meta, which
// inserts two fields before the CRC:
//
//	32 flags uint32 (bit 0: compacted)
//	36 oldest retained tombstone timestamp int64 (ms; MaxInt64 if none)
//	44 CRC-32C of bytes 0..44
//
// It is authoritative (the applied index of every batch is a delta from its
// base applied index), so a missing or invalid one is a CorruptionError.
const (
	metaSize      = 36
	metaSizeV2    = 48
	metaMagic     = "LGDM"
	metaVersion   = 1
	metaVersionV2 = 2

	metaFlagCompacted = 1
)

type segMeta struct {
	base        int64
	baseApplied uint64
	created     int64
	// compacted marks a segment written by compaction: its batches may hold
	// fewer records than offsets (recordCount <= lastOffsetDelta+1).
	compacted bool
	// tombstoneTs is the smallest timestamp (ms) of a tombstone compaction
	// kept in the segment, math.MaxInt64 if none (compacted segments only).
	tombstoneTs int64
}

func (m segMeta) encode() []byte {
	if !m.compacted {
		b := make([]byte, metaSize)
		m.put(b, metaVersion)
		binary.BigEndian.PutUint32(b[32:], crc32.Checksum(b[:32], castagnoli))
		return b
	}
	b := make([]byte, metaSizeV2)
	m.put(b, metaVersionV2)
	binary.BigEndian.PutUint32(b[32:], metaFlagCompacted)
	binary.BigEndian.PutUint64(b[36:], uint64(m.tombstoneTs))
	binary.BigEndian.PutUint32(b[44:], crc32.Checksum(b[:44], castagnoli))
	return b
}

func (m segMeta) put(b []byte, version uint32) {
	copy(b, metaMagic)
	binary.BigEndian.PutUint32(b[4:], version)
	binary.BigEndian.PutUint64(b[8:], uint64(m.base))
	binary.BigEndian.PutUint64(b[16:], m.baseApplied)
	binary.BigEndian.PutUint64(b[24:], uint64(m.created))
}

func decodeMeta(b []byte) (segMeta, error) {
	if len(b) != metaSize && len(b) != metaSizeV2 {
		return segMeta{}, fmt.Errorf("meta file is %d bytes, want %d or %d", len(b), metaSize, metaSizeV2)
	}
	if string(b[:4]) != metaMagic {
		return segMeta{}, errors.New("meta file has a bad magic")
	}
	n := len(b) - 4
	if crc32.Checksum(b[:n], castagnoli) != binary.BigEndian.Uint32(b[n:]) {
		return segMeta{}, errors.New("meta file fails its CRC")
	}
	v := binary.BigEndian.Uint32(b[4:])
	if !(v == metaVersion && len(b) == metaSize) && !(v == metaVersionV2 && len(b) == metaSizeV2) {
		return segMeta{}, fmt.Errorf("meta file version %d unknown (or of the wrong size)", v)
	}
	m := segMeta{
		base:        int64(binary.BigEndian.Uint64(b[8:])),
		baseApplied: binary.BigEndian.Uint64(b[16:]),
		created:     int64(binary.BigEndian.Uint64(b[24:])),
		tombstoneTs: math.MaxInt64,
	}
	if v == metaVersionV2 {
		m.compacted = binary.BigEndian.Uint32(b[32:])&metaFlagCompacted != 0
		m.tombstoneTs = int64(binary.BigEndian.Uint64(b[36:]))
	}
	return m, nil
}

// writeMeta creates name exclusively, writes m and syncs the file. The caller
// syncs the directory.
func writeMeta(fsys FS, name string, m segMeta) error {
	f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(m.encode())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readAll reads a whole file with ReadAt, for small files.
func readAll(f File) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	n := fi.Size()
	if n > 1<<31 {
		return nil, fmt.Errorf("file of %d bytes too large to read whole", n)
	}
	b := make([]byte, n)
	if err := readFull(f, b, 0); err != nil {
		return nil, err
	}
	return b, nil
}
