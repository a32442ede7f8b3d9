package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/logd-dev/logd/client"
)

// HeaderID is the header a relayed record carries its outbox id in; the
// id is also the record's idempotency key. Package inbox reads it.
const HeaderID = "logd-outbox-id"

// DefaultTable is the outbox table's default name; its lease table is
// the name with "_lease" appended.
const DefaultTable = "logd_outbox"

// Message is an event to relay.
type Message struct {
	// ID is the event's outbox id; empty for a new one (the usual case).
	// A caller that sets it must pass a valid id (ValidID) unique in the
	// table, for example one it made with NewID and stored beside the
	// business row.
	ID string
	// Topic is the logd topic to append to. Required.
	Topic string
	// Key is the record key; nil for a null key. Records of one key go to
	// one partition, in id order.
	Key []byte
	// Value is the payload; nil for a null value.
	Value []byte
	// Headers are carried as given, followed by HeaderID.
	Headers []client.Header
}

// Options configure an Outbox. The zero value is the default table on
// the wall clock.
type Options struct {
	// Table is the outbox table; its lease table is Table+"_lease".
	// Default DefaultTable. See ValidTable.
	Table string
	// Now is the clock for ids and ages. Default time.Now.
	Now func() time.Time
}

// Validate reports options that cannot be used.
func (o Options) Validate() error {
	if o.Table != "" {
		if err := ValidTable(o.Table); err != nil {
			return err
		}
	}
	return nil
}

// Outbox writes events into one outbox table. It is safe for concurrent
// use; its ids increase in the order Write (or NewID) is called.
type Outbox struct {
	table string
	lease string
	now   func() time.Time
	ids   idGen

	insert string
}

// New returns an Outbox for the table the options name. It does not touch
// the database; create the tables with SQLiteSchema or PostgresSchema.
func New(opts Options) (*Outbox, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Table == "" {
		opts.Table = DefaultTable
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	o := &Outbox{table: opts.Table, lease: opts.Table + "_lease", now: opts.Now}
	o.insert = "INSERT INTO " + o.table + " (id, topic, msg_key, value, headers, created_ms) VALUES ($1, $2, $3, $4, $5, $6)"
	return o, nil
}

// Table returns the outbox table's name.
func (o *Outbox) Table() string { return o.table }

// NewID returns a new id, greater than every id this Outbox made before.
func (o *Outbox) NewID() string { return o.ids.next(o.now()) }

// Write inserts m into the outbox table within tx, the caller's
// transaction, and returns its id. The event is relayed if and only if tx
// commits. A message without a topic or with an invalid id is refused
// with ErrBadMessage before anything is written.
func (o *Outbox) Write(ctx context.Context, tx *sql.Tx, m Message) (string, error) {
	if m.Topic == "" {
		return "", fmt.Errorf("%w: no topic", ErrBadMessage)
	}
	if m.ID == "" {
		m.ID = o.NewID()
	} else if !ValidID(m.ID) {
		return "", fmt.Errorf("%w: id %q", ErrBadMessage, m.ID)
	}
	var hdr []byte
	if len(m.Headers) > 0 {
		var err error
		if hdr, err = json.Marshal(m.Headers); err != nil {
			return "", fmt.Errorf("outbox: encode headers: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, o.insert, m.ID, m.Topic, m.Key, m.Value, hdr, o.now().UnixMilli()); err != nil {
		return "", fmt.Errorf("outbox: insert %s into %s: %w", m.ID, o.table, err)
	}
	return m.ID, nil
}
