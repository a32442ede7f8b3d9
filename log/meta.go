package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
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
// It is authoritative (the applied index of every batch is a delta from its
// base applied index), so a missing or invalid one is a CorruptionError.
const (
	metaSize    = 36
	metaMagic   = "LGDM"
	metaVersion = 1
)

type segMeta struct {
	base        int64
	baseApplied uint64
	created     int64
}

func (m segMeta) encode() []byte {
	b := make([]byte, metaSize)
	copy(b, metaMagic)
	binary.BigEndian.PutUint32(b[4:], metaVersion)
	binary.BigEndian.PutUint64(b[8:], uint64(m.base))
	binary.BigEndian.PutUint64(b[16:], m.baseApplied)
	binary.BigEndian.PutUint64(b[24:], uint64(m.created))
	binary.BigEndian.PutUint32(b[32:], crc32.Checksum(b[:32], castagnoli))
	return b
}

func decodeMeta(b []byte) (segMeta, error) {
	if len(b) != metaSize {
		return segMeta{}, fmt.Errorf("meta file is %d bytes, want %d", len(b), metaSize)
	}
	if string(b[:4]) != metaMagic {
		return segMeta{}, errors.New("meta file has a bad magic")
	}
	if crc32.Checksum(b[:32], castagnoli) != binary.BigEndian.Uint32(b[32:]) {
		return segMeta{}, errors.New("meta file fails its CRC")
	}
	if v := binary.BigEndian.Uint32(b[4:]); v != metaVersion {
		return segMeta{}, fmt.Errorf("meta file version %d unknown", v)
	}
	return segMeta{
		base:        int64(binary.BigEndian.Uint64(b[8:])),
		baseApplied: binary.BigEndian.Uint64(b[16:]),
		created:     int64(binary.BigEndian.Uint64(b[24:])),
	}, nil
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
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, err
	}
	return b, nil
}
