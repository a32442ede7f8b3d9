package fsm

import (
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/log"
)

// RecordCodec is the log.RecordCodec of Kafka record batches: package log
// parses only batch headers (it imports nothing but the standard library),
// so the record-level reading and rewriting of compaction lives here, on
// package batch. Control batches are kept whole and their records are not
// keyed. A compressed batch that loses records is rewritten uncompressed
// (batch.Filter). Take it from FSM.RecordCodec.
type RecordCodec struct {
	// decodes tells the codecs it reads (FSM.decodes); a batch of another
	// is refused, so compaction of its segments waits. The zero value
	// reads the codecs of every level: none and gzip.
	decodes func(batch.Compression) bool
}

var _ log.RecordCodec = RecordCodec{}

// RecordCodec returns the codec compaction reads batches with at the
// state machine's applied level (AppliedLevel): below CompressionLevel it
// refuses snappy, lz4 and zstd batches, as builds before that level did.
// The leader's cleaner prepares with the codec of its applied state, and
// every replica applies the compaction with the codec of the command's
// index. They agree: a level only rises, and below CompressionLevel a run
// that meets such a batch is refused, so a run prepared below it has none.
func (f *FSM) RecordCodec() RecordCodec { return RecordCodec{decodes: f.decodes} }

// check refuses a batch of a codec the codec does not read.
func (c RecordCodec) check(b []byte) error {
	info, err := batch.Peek(b)
	if err != nil {
		return nil // Decode reports it
	}
	if c.decodes == nil && newCodec(info.Compression()) || c.decodes != nil && !c.decodes(info.Compression()) {
		return &batch.UnsupportedCompressionError{Codec: info.Compression()}
	}
	return nil
}

// Records calls fn for each record of a batch (none for a control batch).
func (c RecordCodec) Records(b []byte, fn func(log.Record)) error {
	if err := c.check(b); err != nil {
		return err
	}
	bt, _, err := batch.Decode(b)
	if err != nil {
		return err
	}
	if bt.IsControl() {
		return nil
	}
	for i := range bt.Records {
		fn(toLogRecord(&bt.Records[i]))
	}
	return nil
}

// Filter rewrites a batch keeping the records keep accepts.
func (c RecordCodec) Filter(b []byte, keep func(log.Record) bool) ([]byte, error) {
	if err := c.check(b); err != nil {
		return nil, err
	}
	return batch.Filter(b, func(r *batch.Record) bool { return keep(toLogRecord(r)) })
}

func toLogRecord(r *batch.Record) log.Record {
	return log.Record{Offset: r.Offset, Timestamp: r.Timestamp, Key: r.Key, Tombstone: r.Value == nil}
}
