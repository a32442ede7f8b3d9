// Package batch encodes and decodes Kafka RecordBatch v2 ("magic 2"), the
// unit logd stores, replicates and serves.
//
// # Layout
//
// A batch is a 61-byte big-endian header followed by its records:
//
//	offset  size  field
//	     0     8  baseOffset
//	     8     4  batchLength (total size - 12)
//	    12     4  partitionLeaderEpoch
//	    16     1  magic (2)
//	    17     4  crc: CRC-32C (Castagnoli) of bytes 21..end
//	    21     2  attributes (bits 0-2 codec, 3 timestamp type,
//	              4 transactional, 5 control)
//	    23     4  lastOffsetDelta
//	    27     8  baseTimestamp
//	    35     8  maxTimestamp
//	    43     8  producerId
//	    51     2  producerEpoch
//	    53     4  baseSequence
//	    57     4  recordCount
//
// Each record is a zigzag varint length followed by attributes (int8),
// timestampDelta (varlong), offsetDelta (varint), key and value (varint
// length, -1 for null, then bytes) and headers (varint count, then for each a
// string key and a nullable value).
//
// # Invariants
//
//   - baseOffset and partitionLeaderEpoch lie outside the CRC, so a log may
//     rewrite them (see [SetBaseOffset]) without re-encoding a batch.
//   - [Decode] checks the length, magic, CRC and every record's structure.
//     A batch whose declared length runs past the input is [ErrTruncated] (a
//     torn tail); a complete batch whose content is inconsistent is
//     [ErrCorrupt]; a checksum mismatch is [ErrBadCRC].
//   - Decoding never panics and never allocates in proportion to a count or
//     length read from the input beyond what the input itself could hold.
//     Decompressed records are capped at [MaxUncompressedSize] for every
//     codec, and a batch that would pass it is refused while it inflates:
//     gzip, lz4 and zstd output is read through the bound, and snappy
//     blocks declare their length, which is checked before decoding. A zstd
//     frame may make the decoder reserve its declared content size (within
//     the bound) or a window of at most 8 MiB; an lz4 frame a block of at
//     most 4 MiB.
//
// # Caveats
//
//   - Decoded keys, values and header values alias the input of an
//     uncompressed batch: the caller must not modify the input while it uses
//     the records, and must copy what it keeps beyond the input's lifetime.
//     For a compressed batch they alias a fresh buffer owned by the result.
//   - Every codec Kafka defines is decompressed: gzip, snappy (one raw
//     block, as librdkafka and franz-go write it, or the xerial framing of
//     Kafka's Java producer), lz4 (the frame format) and zstd. Snappy is
//     decoded strictly to the snappy format. [Peek] and [Verify] never look
//     inside the records.
//   - [Build] writes uncompressed CreateTime batches without producer state
//     (producerId -1, producerEpoch -1, baseSequence -1); [Compress]
//     compresses one. [Filter] rewrites a compressed batch uncompressed:
//     compressors do not promise the same bytes from one library version to
//     the next, and replicas compare compaction's output byte for byte.
package batch
