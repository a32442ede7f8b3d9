package outbox

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/logd-dev/logd/client"
)

// Defaults of RelayOptions.
const (
	DefaultBatchSize     = 500
	DefaultPollInterval  = 200 * time.Millisecond
	DefaultLeaseTTL      = 10 * time.Second
	DefaultMinBackoff    = 50 * time.Millisecond
	DefaultMaxBackoff    = 5 * time.Second
	DefaultMaxRedelivery = time.Hour
	// MaxBatchSize bounds BatchSize: a batch's delete names each id as a
	// parameter, well within SQLite's and PostgreSQL's limits.
	MaxBatchSize = 10000
)

// RelayOptions configure a Relay. Client and DB are required; every other
// field documents its zero-value default.
type RelayOptions struct {
	// Client appends the records; its RetryPolicy (and retry budget)
	// retries each Produce, whose records all carry idempotency keys.
	Client *client.Client
	// DB holds the outbox and lease tables.
	DB *sql.DB
	// Name names the lease: relays of one table with the same Name take
	// turns. Default "default".
	Name string
	// Holder names this relay in the lease row. Default host name, pid
	// and a random suffix.
	Holder string
	// BatchSize is the most rows read and appended at once.
	// Default DefaultBatchSize.
	BatchSize int
	// PollInterval is the wait after an empty read or a lease held by
	// another relay. Default DefaultPollInterval.
	PollInterval time.Duration
	// LeaseTTL is how long a lease lasts without renewal; another relay
	// takes over that long after the active one stops. Each append is
	// bounded by what remains of it. Default DefaultLeaseTTL.
	LeaseTTL time.Duration
	// MinBackoff and MaxBackoff bound the wait after a failed batch
	// (doubling, with jitter; at least the server's retry-after hint).
	// Defaults DefaultMinBackoff and DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// MaxRedelivery is the longest time after an append that this relay
	// (or its successor) may append the same row again: how long a relay
	// may be down after appending and before deleting. A topic whose
	// idempotency.window.ms is shorter, or whose idempotency.max.keys is
	// below BatchSize, draws a warning. Default DefaultMaxRedelivery.
	MaxRedelivery time.Duration
	// Logger receives the lease's changes (info: started, took, waits
	// for, lost), warnings and errors. Default slog.Default().
	Logger *slog.Logger
}

// Validate reports options that cannot be used.
func (o RelayOptions) Validate() error {
	var errs []error
	if o.Client == nil {
		errs = append(errs, errors.New("no client"))
	}
	if o.DB == nil {
		errs = append(errs, errors.New("no database"))
	}
	if o.BatchSize > MaxBatchSize {
		errs = append(errs, fmt.Errorf("batch size %d above %d", o.BatchSize, MaxBatchSize))
	}
	if o.BatchSize < 0 || o.PollInterval < 0 || o.LeaseTTL < 0 || o.MinBackoff < 0 || o.MaxBackoff < 0 || o.MaxRedelivery < 0 {
		errs = append(errs, errors.New("negative size or duration"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrBadOptions, err)
	}
	return nil
}

func (o RelayOptions) withDefaults() RelayOptions {
	if o.Name == "" {
		o.Name = "default"
	}
	if o.Holder == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = crand.Read(b[:])
		o.Holder = host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.MinBackoff == 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	if o.MaxRedelivery == 0 {
		o.MaxRedelivery = DefaultMaxRedelivery
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Stats are a relay's metrics: counters since it was made and gauges as
// of its last look at the table.
type Stats struct {
	// Active is true while this relay holds the lease.
	Active bool
	// Pending is the number of rows in the table; OldestPendingAge the
	// age of the oldest (zero when none). A standby counts them too, at
	// most once a second, so they say how far the active relay (or a
	// dead one whose lease has not expired) is behind.
	Pending          int64
	OldestPendingAge time.Duration
	// Relayed counts rows appended and deleted by this relay; Duplicates
	// those logd answered as duplicates of an earlier append.
	Relayed, Duplicates uint64
	// Errors counts failed batches; WindowWarnings topics whose
	// idempotency window does not cover MaxRedelivery.
	Errors, WindowWarnings uint64
}

// gaugeEvery is how often a relay draining a backlog counts the table.
const gaugeEvery = time.Second

// point names where a relay can be stopped in tests (export_test.go).
type point int

const (
	beforeProduce point = iota
	afterProduce
)

// Relay appends an outbox table's committed rows to logd. Make one with
// Outbox.NewRelay and run it with Run.
type Relay struct {
	ob   *Outbox
	opts RelayOptions

	// noKeys drops idempotency keys (export_test.go): the protection the
	// crash tests show failing without.
	noKeys bool
	// hook, if set, is called at each point; an error stops the batch
	// there as a crash would (export_test.go).
	hook func(point) error

	gauged time.Time // owned by Run's goroutine: the last gauge
	// holding and waitingFor are owned by Run's goroutine: whether the
	// last step held the lease, and the other holder last logged as
	// holding it (so each change is logged once).
	holding    bool
	waitingFor string

	mu      sync.Mutex
	stats   Stats           // guarded by mu
	checked map[string]bool // guarded by mu: topics whose window was checked
}

// NewRelay returns a relay of the outbox's table. It starts nothing.
func (o *Outbox) NewRelay(opts RelayOptions) (*Relay, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Relay{ob: o, opts: opts.withDefaults(), checked: map[string]bool{}}, nil
}

// Stats returns the relay's metrics.
func (r *Relay) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Run relays until ctx ends, then gives up its lease and returns nil.
// Failed batches (logd unavailable or overloaded once the client's
// retries and retry budget are spent, a database error, a lost lease) are
// logged, counted in Stats.Errors and tried again after a backoff of
// MinBackoff doubling to MaxBackoff, with jitter, and at least the
// server's retry-after. A relay stopped at any point leaves every row
// either in the table or appended (or both, which the next relay's
// idempotent append resolves).
func (r *Relay) Run(ctx context.Context) error {
	r.opts.Logger.Info("outbox relay: started", "table", r.ob.table, "lease", r.opts.Name, "holder", r.opts.Holder)
	backoff := time.Duration(0)
	for {
		wait, err := r.step(ctx)
		if ctx.Err() != nil {
			r.release()
			r.opts.Logger.Info("outbox relay: stopped; lease released", "table", r.ob.table, "lease", r.opts.Name, "holder", r.opts.Holder)
			return nil
		}
		if err != nil {
			r.count(func(s *Stats) { s.Errors++ })
			r.opts.Logger.Warn("outbox relay: batch failed", "table", r.ob.table, "err", err)
			backoff = min(max(2*backoff, r.opts.MinBackoff), r.opts.MaxBackoff)
			wait = backoff/2 + rand.N(backoff/2+1)
			if o, ok := errors.AsType[*client.OverloadedError](err); ok && o.RetryAfter > wait {
				wait = o.RetryAfter
			}
		} else {
			backoff = 0
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				r.release()
				r.opts.Logger.Info("outbox relay: stopped; lease released", "table", r.ob.table, "lease", r.opts.Name, "holder", r.opts.Holder)
				return nil
			case <-t.C:
			}
		}
	}
}

func (r *Relay) count(f func(*Stats)) {
	r.mu.Lock()
	f(&r.stats)
	r.mu.Unlock()
}

// step runs one batch; it returns how long to wait before the next.
func (r *Relay) step(ctx context.Context) (time.Duration, error) {
	expires, ok, err := r.acquire(ctx)
	if err != nil {
		r.count(func(s *Stats) { s.Active = false })
		return 0, fmt.Errorf("lease: %w", err)
	}
	r.count(func(s *Stats) { s.Active = ok })
	r.noteLease(ctx, ok)
	if !ok {
		// A standby's gauges too say how far behind the table is.
		if time.Since(r.gauged) > gaugeEvery {
			if err := r.gauge(ctx); err != nil {
				return 0, err
			}
			r.gauged = time.Now()
		}
		return r.opts.PollInterval, nil
	}
	rows, err := r.read(ctx)
	if err != nil {
		return 0, err
	}
	// The gauges count the table: after each short batch, and at most
	// once a second while a backlog drains.
	if len(rows) < r.opts.BatchSize || time.Since(r.gauged) > gaugeEvery {
		if err := r.gauge(ctx); err != nil {
			return 0, err
		}
		r.gauged = time.Now()
	}
	if len(rows) == 0 {
		return r.opts.PollInterval, nil
	}
	for _, row := range rows {
		r.checkWindow(ctx, row.topic)
	}
	if r.hook != nil {
		if err := r.hook(beforeProduce); err != nil {
			return 0, err
		}
	}
	pctx, cancel := context.WithDeadline(ctx, expires)
	dups, err := r.produce(pctx, rows)
	cancel()
	if err != nil {
		return 0, err
	}
	if r.hook != nil {
		if err := r.hook(afterProduce); err != nil {
			return 0, err
		}
	}
	n, err := r.delete(ctx, rows)
	if err != nil {
		return 0, err
	}
	r.count(func(s *Stats) { s.Relayed += uint64(n); s.Duplicates += uint64(dups) })
	return 0, nil
}

type row struct {
	id      string
	topic   string
	key     []byte
	value   []byte
	headers []byte
	created int64
}

func (r *Relay) read(ctx context.Context) ([]row, error) {
	q := "SELECT id, topic, msg_key, value, headers, created_ms FROM " + r.ob.table + " ORDER BY id LIMIT $1"
	rs, err := r.opts.DB.QueryContext(ctx, q, r.opts.BatchSize)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", r.ob.table, err)
	}
	defer rs.Close()
	var out []row
	for rs.Next() {
		var w row
		if err := rs.Scan(&w.id, &w.topic, &w.key, &w.value, &w.headers, &w.created); err != nil {
			return nil, fmt.Errorf("read %s: %w", r.ob.table, err)
		}
		out = append(out, w)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", r.ob.table, err)
	}
	return out, nil
}

// produce appends rows in id order: each run of consecutive rows of one
// topic in one Produce call, so a key's records keep their order. It
// returns how many were duplicates.
func (r *Relay) produce(ctx context.Context, rows []row) (int, error) {
	dups := 0
	for start := 0; start < len(rows); {
		end := start + 1
		for end < len(rows) && rows[end].topic == rows[start].topic {
			end++
		}
		recs := make([]client.Record, 0, end-start)
		for _, w := range rows[start:end] {
			var hs []client.Header
			if len(w.headers) > 0 {
				if err := json.Unmarshal(w.headers, &hs); err != nil {
					return dups, fmt.Errorf("row %s: decode headers: %w", w.id, err)
				}
			}
			hs = append(hs, client.Header{Key: HeaderID, Value: []byte(w.id)})
			rec := client.Record{Key: w.key, Value: w.value, Headers: hs, IdempotencyKey: w.id}
			if r.noKeys {
				rec.IdempotencyKey = ""
			}
			recs = append(recs, rec)
		}
		res, err := r.opts.Client.Produce(ctx, rows[start].topic, recs)
		if err != nil {
			return dups, err
		}
		for _, x := range res {
			if x.Duplicate {
				dups++
			}
		}
		start = end
	}
	return dups, nil
}

// delete removes the appended rows in a transaction that still finds this
// relay's lease, so a relay that lost its lease deletes nothing (its
// successor appends those rows again, as duplicates).
func (r *Relay) delete(ctx context.Context, rows []row) (int, error) {
	tx, err := r.opts.DB.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("delete from %s: %w", r.ob.table, err)
	}
	defer tx.Rollback()
	// A write first: SQLite then takes its write lock at once.
	res, err := tx.ExecContext(ctx, "UPDATE "+r.ob.lease+" SET expires_ms = expires_ms WHERE name = $1 AND holder = $2", r.opts.Name, r.opts.Holder)
	if err != nil {
		return 0, fmt.Errorf("delete from %s: check lease: %w", r.ob.table, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return 0, fmt.Errorf("delete from %s: lease %q lost", r.ob.table, r.opts.Name)
	}
	args := make([]any, len(rows))
	for i, w := range rows {
		args[i] = w.id
	}
	res, err = tx.ExecContext(ctx, "DELETE FROM "+r.ob.table+" WHERE id IN ("+quoteList(1, len(rows))+")", args...)
	if err != nil {
		return 0, fmt.Errorf("delete from %s: %w", r.ob.table, err)
	}
	n, _ := res.RowsAffected()
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("delete from %s: commit: %w", r.ob.table, err)
	}
	return int(n), nil
}

// acquire takes or renews the lease; it returns its expiry and whether
// this relay holds it. The lease's expiry is judged by this relay's
// clock, so relays' clocks must agree to well within LeaseTTL.
func (r *Relay) acquire(ctx context.Context) (time.Time, bool, error) {
	now := time.Now()
	exp := now.Add(r.opts.LeaseTTL)
	res, err := r.opts.DB.ExecContext(ctx, "UPDATE "+r.ob.lease+" SET holder = $1, expires_ms = $2 WHERE name = $3 AND (holder = $1 OR expires_ms < $4)",
		r.opts.Holder, exp.UnixMilli(), r.opts.Name, now.UnixMilli())
	if err != nil {
		return time.Time{}, false, err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return exp, true, nil
	}
	res, err = r.opts.DB.ExecContext(ctx, "INSERT INTO "+r.ob.lease+" (name, holder, expires_ms) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING",
		r.opts.Name, r.opts.Holder, exp.UnixMilli())
	if err != nil {
		return time.Time{}, false, err
	}
	n, _ := res.RowsAffected()
	return exp, n == 1, nil
}

// noteLease logs the lease's changes: taken, lost, and whom this relay
// waits for until when (a relay killed with its lease held makes its
// successor wait up to LeaseTTL, which would otherwise look like a hang).
func (r *Relay) noteLease(ctx context.Context, ok bool) {
	log := r.opts.Logger
	switch {
	case ok && !r.holding:
		log.Info("outbox relay: took the lease", "table", r.ob.table, "lease", r.opts.Name, "holder", r.opts.Holder)
		r.waitingFor = ""
	case !ok:
		holder, until, err := r.leaseHolder(ctx)
		if err != nil || holder == r.waitingFor && !r.holding {
			break
		}
		msg := "outbox relay: waiting for the lease"
		if r.holding {
			msg = "outbox relay: lost the lease"
		}
		log.Info(msg, "table", r.ob.table, "lease", r.opts.Name, "holder", r.opts.Holder, "held_by", holder,
			"expires", until.UTC().Format(time.RFC3339Nano))
		r.waitingFor = holder
	}
	r.holding = ok
}

// leaseHolder reads who holds the lease and until when.
func (r *Relay) leaseHolder(ctx context.Context) (string, time.Time, error) {
	var holder string
	var ms int64
	err := r.opts.DB.QueryRowContext(ctx, "SELECT holder, expires_ms FROM "+r.ob.lease+" WHERE name = $1", r.opts.Name).Scan(&holder, &ms)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("read lease %q: %w", r.opts.Name, err)
	}
	return holder, time.UnixMilli(ms), nil
}

// release gives the lease up so a successor need not wait for it to
// expire; a failure only delays the successor.
func (r *Relay) release() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = r.opts.DB.ExecContext(ctx, "DELETE FROM "+r.ob.lease+" WHERE name = $1 AND holder = $2", r.opts.Name, r.opts.Holder)
	r.count(func(s *Stats) { s.Active = false })
}

// gauge refreshes Pending and OldestPendingAge.
func (r *Relay) gauge(ctx context.Context) error {
	var n int64
	var oldest sql.NullInt64
	if err := r.opts.DB.QueryRowContext(ctx, "SELECT COUNT(*), MIN(created_ms) FROM "+r.ob.table).Scan(&n, &oldest); err != nil {
		return fmt.Errorf("count %s: %w", r.ob.table, err)
	}
	var age time.Duration
	if oldest.Valid {
		age = max(r.ob.now().Sub(time.UnixMilli(oldest.Int64)), 0)
	}
	r.count(func(s *Stats) { s.Pending = n; s.OldestPendingAge = age })
	return nil
}

// checkWindow warns, once per topic, when the topic's idempotency window
// cannot cover a redelivery: shorter than MaxRedelivery, or holding fewer
// keys than one batch. A topic it cannot describe is checked again later.
func (r *Relay) checkWindow(ctx context.Context, topic string) {
	r.mu.Lock()
	done := r.checked[topic]
	r.mu.Unlock()
	if done {
		return
	}
	d, err := r.opts.Client.DescribeTopic(ctx, topic)
	if err != nil {
		return
	}
	warn := false
	if ms, err := strconv.ParseInt(d.Topic.Config["idempotency.window.ms"], 10, 64); err == nil && time.Duration(ms)*time.Millisecond < r.opts.MaxRedelivery {
		r.opts.Logger.Warn("outbox relay: the topic's idempotency window is shorter than the relay's worst-case redelivery; a relay down longer than the window may append rows twice",
			"topic", topic, "idempotency.window.ms", ms, "max_redelivery", r.opts.MaxRedelivery)
		warn = true
	}
	if n, err := strconv.ParseInt(d.Topic.Config["idempotency.max.keys"], 10, 64); err == nil && n < int64(r.opts.BatchSize) {
		r.opts.Logger.Warn("outbox relay: the topic's idempotency.max.keys is below the relay's batch size; a re-appended batch may find its keys evicted",
			"topic", topic, "idempotency.max.keys", n, "batch_size", r.opts.BatchSize)
		warn = true
	}
	r.mu.Lock()
	r.checked[topic] = true
	if warn {
		r.stats.WindowWarnings++
	}
	r.mu.Unlock()
}
