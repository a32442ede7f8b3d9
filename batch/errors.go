package batch

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned by this package match one of them with
// [errors.Is]; the typed errors below carry the details.
var (
	// ErrTruncated means the input ends before the batch it starts does:
	// fewer than 12 bytes, or fewer than the declared batch length. At the
	// tail of a log this is a torn write.
	ErrTruncated = errors.New("batch: truncated")

	// ErrCorrupt means a complete batch is structurally invalid: an
	// impossible length or count, a malformed varint, a record that overruns
	// the batch, or bytes left over after the last record.
	ErrCorrupt = errors.New("batch: corrupt")

	// ErrBadCRC means the stored CRC-32C does not match the batch content.
	ErrBadCRC = errors.New("batch: crc mismatch")

	// ErrBadMagic means the magic byte is not 2 (an older message format or
	// not a batch at all).
	ErrBadMagic = errors.New("batch: unsupported magic")

	// ErrUnsupportedCompression means a codec is refused: [Compress] given a
	// codec Kafka does not define, or a caller that does not read a codec
	// yet (the state machine below the feature level that brought snappy,
	// lz4 and zstd). Decode reads every codec Kafka defines; an unknown one
	// is [ErrCorrupt].
	ErrUnsupportedCompression = errors.New("batch: unsupported compression")

	// ErrNoRecords is returned by Build for an empty record list: Kafka
	// producers never send an empty batch.
	ErrNoRecords = errors.New("batch: no records")

	// ErrTooLarge is returned by Build when a length does not fit the
	// format's int32 fields.
	ErrTooLarge = errors.New("batch: too large")
)

// TruncatedError reports how many bytes a batch needs and how many the input
// has. It matches [ErrTruncated].
type TruncatedError struct {
	Need int // bytes needed to read the batch (12 when the length is unknown)
	Have int // bytes available
}

func (e *TruncatedError) Error() string {
	return fmt.Sprintf("batch: truncated: need %d bytes, have %d", e.Need, e.Have)
}

// Unwrap returns [ErrTruncated].
func (e *TruncatedError) Unwrap() error { return ErrTruncated }

// CorruptError describes a structural problem inside a batch. It matches
// [ErrCorrupt].
type CorruptError struct {
	BaseOffset int64  // the batch's base offset as stored
	Pos        int    // byte position of the problem, relative to the batch start (or to the decompressed records, if Compressed)
	Compressed bool   // Pos refers to the decompressed record bytes
	Reason     string // what is wrong
}

func (e *CorruptError) Error() string {
	where := "batch"
	if e.Compressed {
		where = "decompressed records"
	}
	return fmt.Sprintf("batch: corrupt batch at base offset %d: %s (byte %d of %s)", e.BaseOffset, e.Reason, e.Pos, where)
}

// Unwrap returns [ErrCorrupt].
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// CRCError reports a checksum mismatch. It matches [ErrBadCRC].
type CRCError struct {
	BaseOffset int64  // the batch's base offset as stored
	Stored     uint32 // the CRC in the header
	Computed   uint32 // the CRC of the content
}

func (e *CRCError) Error() string {
	return fmt.Sprintf("batch: crc mismatch at base offset %d: stored %#08x, computed %#08x", e.BaseOffset, e.Stored, e.Computed)
}

// Unwrap returns [ErrBadCRC].
func (e *CRCError) Unwrap() error { return ErrBadCRC }

// MagicError reports a magic byte other than 2. It matches [ErrBadMagic].
type MagicError struct {
	Magic int8
}

func (e *MagicError) Error() string {
	return fmt.Sprintf("batch: unsupported magic %d (want 2)", e.Magic)
}

// Unwrap returns [ErrBadMagic].
func (e *MagicError) Unwrap() error { return ErrBadMagic }

// UnsupportedCompressionError names the codec that could not be decoded. It
// matches [ErrUnsupportedCompression].
type UnsupportedCompressionError struct {
	Codec Compression
}

func (e *UnsupportedCompressionError) Error() string {
	return fmt.Sprintf("batch: unsupported compression %s", e.Codec)
}

// Unwrap returns [ErrUnsupportedCompression].
func (e *UnsupportedCompressionError) Unwrap() error { return ErrUnsupportedCompression }
