package batch

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// MaxUncompressedSize bounds the decompressed records of one batch, whatever
// its codec, so a small hostile batch cannot make Decode allocate or inflate
// without limit: decompression stops and fails as soon as the output would
// pass it, before the rest is inflated.
const MaxUncompressedSize = 64 << 20

// maxZstdWindow bounds the window a zstd frame may ask the decoder to keep:
// the format's recommendation for decoders (8 MiB); producers at their usual
// levels stay below it. A frame that declares its content size keeps that
// instead, bounded by MaxUncompressedSize.
const maxZstdWindow = 8 << 20

// maxSnappyRatio bounds what one byte of a snappy block can decode to: the
// largest element, a 64-byte copy, takes 3 bytes. A block that declares more
// than its size allows is refused before its output is allocated.
const maxSnappyRatio = 22

// xerialMagic starts snappy data in the framing of the Java snappy library
// (xerial snappy-java), which Kafka's Java producer writes: the magic, a
// version and a compatible version (4 bytes each, big-endian), then blocks,
// each a 4-byte big-endian length and a raw snappy block. Other producers
// (librdkafka, franz-go) write one raw snappy block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

// errTooLarge is the reason of the CorruptError of a batch whose records
// pass MaxUncompressedSize.
var errTooLarge = fmt.Errorf("records exceed %d bytes uncompressed", MaxUncompressedSize)

// decompress returns the records of a batch compressed with c, at most
// limit bytes of them.
func decompress(c Compression, data []byte, limit int) ([]byte, error) {
	var out []byte
	var err error
	switch c {
	case CompressionGzip:
		out, err = gunzip(data, limit)
	case CompressionSnappy:
		out, err = unsnappy(data, limit)
	case CompressionLZ4:
		out, err = unlz4(data, limit)
	case CompressionZstd:
		out, err = unzstd(data, limit)
	default:
		return nil, &UnsupportedCompressionError{Codec: c}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c, err)
	}
	return out, nil
}

// readBounded reads r to its end, failing as soon as it yields more than
// limit bytes. Its buffer grows with what r yields (from a first guess of
// hint bytes), never with a size r's input declares.
func readBounded(r io.Reader, hint, limit int) ([]byte, error) {
	out := make([]byte, 0, min(max(hint, 512), limit+1))
	for {
		if len(out) == cap(out) {
			// Doubling: what a bomb makes this allocate, the copies
			// included, stays within about three times the limit.
			grown := make([]byte, len(out), min(2*cap(out), limit+1))
			copy(grown, out)
			out = grown
		}
		// One byte past the limit is enough to know it was passed.
		n, err := r.Read(out[len(out):min(cap(out), limit+1)])
		out = out[:len(out)+n]
		if len(out) > limit {
			return nil, errTooLarge
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// gunzip decompresses gzip records (one member or several).
func gunzip(data []byte, limit int) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	return readBounded(zr, 4*len(data), limit)
}

// unsnappy decompresses snappy records: one raw block, or blocks in the
// xerial framing. Each block declares its decoded length, which is checked
// against the bound and against what the block's size allows before
// anything is decoded. Blocks are decoded strictly to the snappy format
// (not the s2 extensions the library's fast decoder also accepts), so what
// is accepted does not depend on the library's leniency.
func unsnappy(data []byte, limit int) ([]byte, error) {
	if !bytes.HasPrefix(data, xerialMagic) {
		n, err := snappyLen(data, limit)
		if err != nil {
			return nil, err
		}
		return snappy.DecodeStrict(make([]byte, n), data)
	}
	if len(data) < xerialHeaderSize {
		return nil, errors.New("xerial header truncated")
	}
	// Two passes: lengths first, so the output is allocated once and a
	// bomb is refused before any block is decoded.
	total := 0
	for rest := data[xerialHeaderSize:]; len(rest) > 0; {
		block, next, err := xerialBlock(rest)
		if err != nil {
			return nil, err
		}
		n, err := snappyLen(block, limit-total)
		if err != nil {
			return nil, err
		}
		total += n
		rest = next
	}
	out := make([]byte, 0, total)
	for rest := data[xerialHeaderSize:]; len(rest) > 0; {
		block, next, _ := xerialBlock(rest)
		n, _ := snappy.DecodedLen(block)
		dec, err := snappy.DecodeStrict(out[len(out):len(out)+n], block)
		if err != nil {
			return nil, err
		}
		out = out[:len(out)+len(dec)]
		rest = next
	}
	return out, nil
}

// xerialBlock splits the next length-prefixed block off data.
func xerialBlock(data []byte) (block, rest []byte, err error) {
	if len(data) < 4 {
		return nil, nil, errors.New("xerial block length truncated")
	}
	n := binary.BigEndian.Uint32(data)
	if uint64(n) > uint64(len(data)-4) {
		return nil, nil, fmt.Errorf("xerial block of %d bytes exceeds the %d left", n, len(data)-4)
	}
	return data[4 : 4+n], data[4+n:], nil
}

// snappyLen returns the decoded length a raw snappy block declares, if it
// is within limit and within what the block can hold.
func snappyLen(block []byte, limit int) (int, error) {
	n, err := snappy.DecodedLen(block)
	switch {
	case err != nil:
		return 0, err
	case n > limit:
		return 0, errTooLarge
	case n/maxSnappyRatio > len(block):
		return 0, fmt.Errorf("a %d-byte block cannot decode to %d bytes", len(block), n)
	}
	return n, nil
}

// lz4Readers reuses frame readers (and, through the library's own pool,
// their block buffers). A reader decodes on the caller's goroutine.
var lz4Readers = sync.Pool{New: func() any { return lz4.NewReader(nil) }}

// unlz4 decompresses lz4 records in the frame format (one frame or
// several). The block checksums and content checksum, when present, are
// checked.
func unlz4(data []byte, limit int) ([]byte, error) {
	zr := lz4Readers.Get().(*lz4.Reader)
	zr.Reset(bytes.NewReader(data))
	out, err := readBounded(zr, 4*len(data), limit)
	zr.Reset(nil)
	lz4Readers.Put(zr)
	return out, err
}

// zstdDecoder is a pooled zstd stream decoder: decoding with concurrency 1
// runs on the caller's goroutine, so pooled decoders hold no goroutine.
type zstdDecoder struct {
	d *zstd.Decoder
	r bytes.Reader
}

var zstdDecoders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxUncompressedSize),
		zstd.WithDecoderMaxWindow(maxZstdWindow))
	if err != nil {
		panic(fmt.Sprintf("batch: zstd decoder options: %v", err)) // constant options
	}
	return &zstdDecoder{d: d}
}}

// unzstd decompresses zstd records (one frame or several).
func unzstd(data []byte, limit int) ([]byte, error) {
	zd := zstdDecoders.Get().(*zstdDecoder)
	defer zstdDecoders.Put(zd)
	zd.r.Reset(data)
	defer zd.r.Reset(nil) // keep no reference to data in the pool
	if err := zd.d.Reset(&zd.r); err != nil {
		return nil, err
	}
	return readBounded(zd.d, 4*len(data), limit)
}

// Compress returns the uncompressed batch at the start of b re-encoded
// with its records compressed by c: the same header (offsets, timestamps,
// producer fields, record count) with the codec in its attributes, and a
// new length and CRC. CompressionNone returns a copy. Snappy is written as
// one raw block, as librdkafka and franz-go write it.
//
// Compressed output is not guaranteed to be the same bytes from one
// version of a compression library to the next, so nothing whose bytes
// replicas compare (compaction's output) is compressed with it.
func Compress(b []byte, c Compression) ([]byte, error) {
	info, err := Verify(b)
	if err != nil {
		return nil, err
	}
	if info.Compression() != CompressionNone {
		return nil, fmt.Errorf("batch: compress: the batch is already compressed with %s", info.Compression())
	}
	records := b[HeaderSize:info.Length]
	var body []byte
	switch c {
	case CompressionNone:
		body = records
	case CompressionGzip:
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(records); err != nil {
			return nil, fmt.Errorf("batch: compress gzip: %w", err)
		}
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("batch: compress gzip: %w", err)
		}
		body = buf.Bytes()
	case CompressionSnappy:
		body = snappy.Encode(nil, records)
	case CompressionLZ4:
		var buf bytes.Buffer
		zw := lz4.NewWriter(&buf)
		if _, err := zw.Write(records); err != nil {
			return nil, fmt.Errorf("batch: compress lz4: %w", err)
		}
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("batch: compress lz4: %w", err)
		}
		body = buf.Bytes()
	case CompressionZstd:
		body = zstdEncoder().EncodeAll(records, nil)
	default:
		return nil, &UnsupportedCompressionError{Codec: c}
	}
	if HeaderSize+len(body)-lengthPrefix > 1<<31-1 {
		return nil, fmt.Errorf("%w: compressed batch of %d bytes", ErrTooLarge, HeaderSize+len(body))
	}
	out := make([]byte, HeaderSize, HeaderSize+len(body))
	copy(out, b[:HeaderSize])
	out = append(out, body...)
	binary.BigEndian.PutUint32(out[posBatchLength:], uint32(len(out)-lengthPrefix))
	attrs := binary.BigEndian.Uint16(out[posAttributes:])&^compressionMask | uint16(c)
	binary.BigEndian.PutUint16(out[posAttributes:], attrs)
	binary.BigEndian.PutUint32(out[posCRC:], crc32.Checksum(out[crcStart:], castagnoli))
	return out, nil
}

// zstdEncoder is the encoder Compress shares; EncodeAll may be called
// concurrently and starts no goroutine.
var zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		panic(fmt.Sprintf("batch: zstd encoder options: %v", err)) // constant options
	}
	return e
})
