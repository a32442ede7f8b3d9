package batch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// HeaderSize is the size of a v2 batch header; an encoded batch is HeaderSize
// bytes plus its records.
const HeaderSize = 61

// Magic is the only message format version this package handles.
const Magic = 2

// lengthPrefix is the number of bytes before and including batchLength; the
// batchLength field counts the bytes after it.
const lengthPrefix = 12

// SetProducer writes an idempotent producer's id, epoch and first
// sequence into the whole batch b (as built by [Build]) and computes its
// CRC again, since those fields are inside it.
func SetProducer(b []byte, id int64, epoch int16, baseSequence int32) {
	binary.BigEndian.PutUint64(b[posProducerID:], uint64(id))
	binary.BigEndian.PutUint16(b[posProducerEpoch:], uint16(epoch))
	binary.BigEndian.PutUint32(b[posBaseSequence:], uint32(baseSequence))
	binary.BigEndian.PutUint32(b[posCRC:], crc32.Checksum(b[crcStart:], castagnoli))
}

// crcStart is the first byte covered by the CRC.
const crcStart = 21

// Byte positions of the header fields.
const (
	posBaseOffset      = 0
	posBatchLength     = 8
	posLeaderEpoch     = 12
	posMagic           = 16
	posCRC             = 17
	posAttributes      = 21
	posLastOffsetDelta = 23
	posBaseTimestamp   = 27
	posMaxTimestamp    = 35
	posProducerID      = 43
	posProducerEpoch   = 51
	posBaseSequence    = 53
	posRecordCount     = 57
)

// Attribute bits.
const (
	compressionMask   = 0x07
	timestampTypeBit  = 0x08
	transactionalBit  = 0x10
	controlBit        = 0x20
	minRecordSize     = 7 // length, attributes, timestampDelta, offsetDelta, key, value, headerCount: one byte each
	minHeaderSize     = 2 // key length and value length
	maxVarint32Length = 5
)

// castagnoli is the CRC-32C table; it is never written after initialisation.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Compression is the codec in bits 0-2 of a batch's attributes.
type Compression int8

// Codecs defined by Kafka.
const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLZ4    Compression = 3
	CompressionZstd   Compression = 4
)

func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionGzip:
		return "gzip"
	case CompressionSnappy:
		return "snappy"
	case CompressionLZ4:
		return "lz4"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// Header is a record header. Kafka header keys are strings and never null;
// a nil Value is a null value, distinct from an empty one.
type Header struct {
	Key   string
	Value []byte
}

// Record is one record of a batch.
type Record struct {
	Offset    int64  // absolute offset when decoded; ignored by Build (records get offsetDelta = index)
	Timestamp int64  // milliseconds since the Unix epoch
	Key       []byte // nil = null key; empty = empty key
	Value     []byte // nil = null value (tombstone); empty = empty value
	Headers   []Header
}

// Batch is a decoded batch. Records holds the decoded records; the other
// fields mirror the header.
type Batch struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	Records              []Record
}

// Compression returns the batch's codec.
func (b *Batch) Compression() Compression { return Compression(b.Attributes & compressionMask) }

// IsControl reports whether this is a control batch (transaction markers);
// its records are decoded like any other but are not application data.
func (b *Batch) IsControl() bool { return b.Attributes&controlBit != 0 }

// IsTransactional reports whether the batch belongs to a transaction.
func (b *Batch) IsTransactional() bool { return b.Attributes&transactionalBit != 0 }

// LogAppendTime reports whether timestamps are broker append times
// (timestampType 1) rather than producer create times.
func (b *Batch) LogAppendTime() bool { return b.Attributes&timestampTypeBit != 0 }

// LastOffset returns the offset of the batch's last offset slot,
// BaseOffset + LastOffsetDelta.
func (b *Batch) LastOffset() int64 { return b.BaseOffset + int64(b.LastOffsetDelta) }

// Info is the header of a batch, read without touching its records.
type Info struct {
	BaseOffset           int64
	Length               int // total encoded size in bytes, batchLength + 12
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// Compression returns the batch's codec.
func (i *Info) Compression() Compression { return Compression(i.Attributes & compressionMask) }

// IsControl reports whether this is a control batch.
func (i *Info) IsControl() bool { return i.Attributes&controlBit != 0 }

// IsTransactional reports whether the batch belongs to a transaction.
func (i *Info) IsTransactional() bool { return i.Attributes&transactionalBit != 0 }

// LastOffset returns BaseOffset + LastOffsetDelta.
func (i *Info) LastOffset() int64 { return i.BaseOffset + int64(i.LastOffsetDelta) }

// NextOffset returns the offset that follows the batch, LastOffset() + 1.
func (i *Info) NextOffset() int64 { return i.LastOffset() + 1 }

// Peek reads the header of the batch at the start of b. It needs only the
// HeaderSize bytes of the header, so a reader can learn a batch's Length
// before reading the rest; it checks the magic and that the lengths and
// counts are plausible, but not the CRC or the records (see [Verify]).
func Peek(b []byte) (Info, error) {
	if len(b) < lengthPrefix {
		return Info{}, &TruncatedError{Need: lengthPrefix, Have: len(b)}
	}
	var info Info
	info.BaseOffset = int64(binary.BigEndian.Uint64(b[posBaseOffset:]))
	batchLength := int64(int32(binary.BigEndian.Uint32(b[posBatchLength:])))
	if batchLength < HeaderSize-lengthPrefix {
		return Info{}, &CorruptError{BaseOffset: info.BaseOffset, Pos: posBatchLength,
			Reason: fmt.Sprintf("batch length %d below the header's %d", batchLength, HeaderSize-lengthPrefix)}
	}
	if batchLength > math.MaxInt32-lengthPrefix {
		// Keeps Length within an int on 32-bit platforms.
		return Info{}, &CorruptError{BaseOffset: info.BaseOffset, Pos: posBatchLength,
			Reason: fmt.Sprintf("batch length %d too large", batchLength)}
	}
	info.Length = int(batchLength + lengthPrefix)
	if len(b) < HeaderSize {
		return Info{}, &TruncatedError{Need: HeaderSize, Have: len(b)}
	}
	info.PartitionLeaderEpoch = int32(binary.BigEndian.Uint32(b[posLeaderEpoch:]))
	info.Magic = int8(b[posMagic])
	if info.Magic != Magic {
		return Info{}, &MagicError{Magic: info.Magic}
	}
	info.CRC = binary.BigEndian.Uint32(b[posCRC:])
	info.Attributes = int16(binary.BigEndian.Uint16(b[posAttributes:]))
	info.LastOffsetDelta = int32(binary.BigEndian.Uint32(b[posLastOffsetDelta:]))
	info.BaseTimestamp = int64(binary.BigEndian.Uint64(b[posBaseTimestamp:]))
	info.MaxTimestamp = int64(binary.BigEndian.Uint64(b[posMaxTimestamp:]))
	info.ProducerID = int64(binary.BigEndian.Uint64(b[posProducerID:]))
	info.ProducerEpoch = int16(binary.BigEndian.Uint16(b[posProducerEpoch:]))
	info.BaseSequence = int32(binary.BigEndian.Uint32(b[posBaseSequence:]))
	info.RecordCount = int32(binary.BigEndian.Uint32(b[posRecordCount:]))
	if reason := info.checkCounts(); reason != "" {
		return Info{}, &CorruptError{BaseOffset: info.BaseOffset, Pos: posLastOffsetDelta, Reason: reason}
	}
	return info, nil
}

// checkCounts validates the header fields that bound the records. A
// compacted batch may hold fewer records than offset slots, even none, but
// never more.
func (i *Info) checkCounts() string {
	switch {
	case i.LastOffsetDelta < 0:
		return fmt.Sprintf("negative last offset delta %d", i.LastOffsetDelta)
	case i.RecordCount < 0:
		return fmt.Sprintf("negative record count %d", i.RecordCount)
	case int64(i.RecordCount) > int64(i.LastOffsetDelta)+1:
		return fmt.Sprintf("record count %d exceeds offset range %d", i.RecordCount, int64(i.LastOffsetDelta)+1)
	case i.Compression() == CompressionNone && int64(i.RecordCount)*minRecordSize > int64(i.Length-HeaderSize):
		return fmt.Sprintf("record count %d cannot fit in %d bytes", i.RecordCount, i.Length-HeaderSize)
	}
	return ""
}

// Verify checks the batch at the start of b without decoding its records:
// the whole batch must be present, its header plausible and its CRC right.
// It works for every codec. It returns the header; the batch is
// b[:info.Length].
func Verify(b []byte) (Info, error) {
	info, err := Peek(b)
	if err != nil {
		return Info{}, err
	}
	if len(b) < info.Length {
		return Info{}, &TruncatedError{Need: info.Length, Have: len(b)}
	}
	if got := crc32.Checksum(b[crcStart:info.Length], castagnoli); got != info.CRC {
		return Info{}, &CRCError{BaseOffset: info.BaseOffset, Stored: info.CRC, Computed: got}
	}
	return info, nil
}

// SetBaseOffset overwrites the base offset of the batch at the start of b.
// The field is outside the CRC, so the batch stays valid. b must hold at
// least the first 8 bytes of a batch.
func SetBaseOffset(b []byte, offset int64) {
	binary.BigEndian.PutUint64(b[posBaseOffset:], uint64(offset))
}

// SetPartitionLeaderEpoch overwrites the partition leader epoch of the batch
// at the start of b. The field is outside the CRC. b must hold at least the
// first 16 bytes of a batch.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[posLeaderEpoch:], uint32(epoch))
}
