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
//     Gzip output is capped at [MaxUncompressedSize].
//
// # Caveats
//
//   - Decoded keys, values and header values alias the input of an
//     uncompressed batch: the caller must not modify the input while it uses
//     the records, and must copy what it keeps beyond the input's lifetime.
//     For a gzip batch they alias a fresh buffer owned by the result.
//   - Only gzip is decompressed; snappy, lz4 and zstd batches yield an
//     [*UnsupportedCompressionError]. [Peek] and [Verify] work for every
//     codec because they never look inside the records.
//   - [Build] writes uncompressed CreateTime batches without producer state
//     (producerId -1, producerEpoch -1, baseSequence -1).
package batch
