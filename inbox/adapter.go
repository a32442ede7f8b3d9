package inbox

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/logd-dev/logd/client"
)

// HeaderID is the header package outbox's relay puts each record's
// outbox id in (outbox.HeaderID; this package does not import outbox).
const HeaderID = "logd-outbox-id"

// IDFrom says where a record's message id comes from. The zero value
// reads HeaderID and has no fallback.
type IDFrom struct {
	// Header names the header holding the id. Default HeaderID.
	Header string
	// OffsetFallback lets a record without the header be named
	// "topic/partition/offset". Use it only for topics whose records are
	// never appended again: a record redriven from a dead letter, or
	// re-published by a producer, gets a new offset and so a new id.
	OffsetFallback bool
}

// ID returns the message id of a record of topic at partition/offset
// with the given headers. The last header of the name wins. A record
// without it is refused with ErrNoID unless OffsetFallback is set.
func (f IDFrom) ID(topic string, partition int32, offset int64, headers []client.Header) (string, error) {
	name := f.Header
	if name == "" {
		name = HeaderID
	}
	id, found := "", false
	for _, h := range headers {
		if h.Key == name {
			id, found = string(h.Value), true
		}
	}
	if found {
		return id, nil
	}
	if !f.OffsetFallback {
		return "", fmt.Errorf("%w: no header %q on %s/%d/%d", ErrNoID, name, topic, partition, offset)
	}
	return fmt.Sprintf("%s/%d/%d", topic, partition, offset), nil
}

// WorkerHandler adapts fn to a client.Worker: each job's effect runs in
// Process, so the worker acks only after the effect and the id are
// committed, and a job delivered again after a lost ack is acked without
// running fn. A job without an id fails (and is redelivered, then
// dead-lettered, by the queue's policy).
func (ib *Inbox) WorkerHandler(db *sql.DB, from IDFrom, fn func(ctx context.Context, tx *sql.Tx, job *client.Job) error) client.Handler {
	return func(ctx context.Context, job *client.Job) error {
		id, err := from.ID(job.Topic, job.Partition, job.Offset, job.Headers)
		if err != nil {
			return err
		}
		_, err = ib.Process(ctx, db, id, func(tx *sql.Tx) error { return fn(ctx, tx, job) })
		return err
	}
}

// ProcessRecord runs fn for a record a client.GroupConsumer (or
// client.Consumer) fetched, through Process. Commit the group's offsets
// after the records' ProcessRecord calls returned: a crash before the
// commit redelivers them, and they are skipped.
func (ib *Inbox) ProcessRecord(ctx context.Context, db *sql.DB, from IDFrom, rec client.FetchedRecord, fn func(tx *sql.Tx) error) (bool, error) {
	id, err := from.ID(rec.Topic, rec.Partition, rec.Offset, rec.Headers)
	if err != nil {
		return false, err
	}
	return ib.Process(ctx, db, id, fn)
}
