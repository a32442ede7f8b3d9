package fsm

import (
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/log"
)

// RecordCodec is the log.RecordCodec of Kafka record batches: package log
// parses only batch headers (it imports nothing but the standard library),
// so the record-level reading and rewriting of compaction lives here, on
// package batch. Control batches are kept whole and their records are not
// keyed. A compressed batch that loses records is rewritten uncompressed.
type RecordCodec struct{}

var _ log.RecordCodec = RecordCodec{}

// Records calls fn for each record of a batch (none for a control batch).
func (RecordCodec) Records(b []byte, fn func(log.Record)) error {
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
func (RecordCodec) Filter(b []byte, keep func(log.Record) bool) ([]byte, error) {
	return batch.Filter(b, func(r *batch.Record) bool { return keep(toLogRecord(r)) })
}

func toLogRecord(r *batch.Record) log.Record {
	return log.Record{Offset: r.Offset, Timestamp: r.Timestamp, Key: r.Key, Tombstone: r.Value == nil}
}
