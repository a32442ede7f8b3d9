package fsm

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/dedup"
	"github.com/logd-dev/logd/log"
)

// FSM is the replicated state machine: topic metadata plus the partition
// logs. ApplyBatch, Snapshot and Restore are called on one goroutine (Raft's
// FSM goroutine); the read methods may be called from any goroutine.
//
// Apply is deterministic: it reads time only from the command (stamped by the
// leader, kept monotonic here), and it is idempotent by Raft index: each
// partition log stores the Raft index of its last append with its data, and
// an append at or below that index is skipped on replay.
type FSM struct {
	root string // <data>/topics
	// group is the data group this state machine runs (Config.Group).
	group uint64
	// dryRun marks DryRunGroup's shadow, which runs off the Raft goroutine
	// (fsmTopics reads no Partition.next there).
	dryRun  bool
	logOpts log.Options
	logger  *slog.Logger
	fatal   func(error)
	// clock measures how long work took, for logs only (never state).
	clock func() time.Time

	mu sync.RWMutex
	// topics by name; guarded by mu. Mutated only by the Raft goroutine.
	topics map[string]*Topic
	// topicsNotify is closed (and replaced) whenever a topic arrives in
	// topics: created, adopted by a data group, or restored. A long poll
	// of a partition this state machine has not adopted yet waits on it
	// (TopicArrived). Guarded by mu.
	topicsNotify chan struct{}

	now     atomic.Int64  // last applied command time, Unix ns (monotonic)
	applied atomic.Uint64 // last applied Raft index
	// level is the highest feature level an applied entry needed
	// (AppliedLevel); replicated state, kept in snapshots.
	level atomic.Uint32
	// bytesSinceSnapshot counts appended batch bytes since the last
	// snapshot; it drives the node's snapshots by size.
	bytesSinceSnapshot atomic.Int64
	// snapshotIndex is the Raft index of the last snapshot taken or
	// restored: with bytesSinceSnapshot it gives the average size of the
	// entries since (SinceSnapshot).
	snapshotIndex atomic.Uint64
	// sinceMu makes a snapshot's resets of bytesSinceSnapshot and
	// snapshotIndex one step for SinceSnapshot, which reads the two
	// together; the applies' additions do not take it.
	sinceMu sync.Mutex
	// segmentsChanged is set when an applied compaction or trim replaced
	// or deleted segments after the last snapshot was taken (or a restored
	// snapshot lists segments the logs no longer hold): that snapshot's
	// manifest names bytes no peer serves any more, so the leader takes a
	// newer one (catchup.go). A node registration that changed a node's
	// addresses sets it too: a follower installing the snapshot fetches
	// segments from the peers its registry lists, and a cluster restored
	// from a backup starts with none (backup.go). Not state: replicas may
	// differ in it.
	segmentsChanged atomic.Bool
	// snapshotted is set once a snapshot was taken or restored: before
	// that no snapshot can name a node at a stale address.
	snapshotted atomic.Bool
	// windowBytes is the size of the idempotency windows in the last
	// snapshot persisted; it raises the by-size trigger.
	windowBytes atomic.Int64
	// failed holds the fatal error after an I/O error in Apply; from then on
	// nothing is applied or acknowledged.
	failed atomic.Pointer[error]
	// groups is the consumer group state (groups.go).
	groups consumerGroups
	// queues is the queue groups' lease state (queue_state.go).
	queues queueGroups
	// cleaner is the retention and compaction state (cleaner_state.go).
	cleaner cleanerState
	// nodes is the registry of client API addresses (cluster_state.go).
	nodes nodeRegistry
	// security is the tokens and ACLs (security_state.go).
	security securityState
	// nextProducerID is the Kafka producer id the next ProducerInit hands
	// out (apply_producer_init.go); only the Raft goroutine touches it.
	nextProducerID int64
	// dataGroups is the meta group's table of data groups
	// (data_groups.go).
	dataGroups dataGroupTable
	// redrives are the redrive jobs (redrive_state.go).
	redrives redriveJobs
	// shareConfigs are the Kafka share groups' settings
	// (share_configs.go).
	shareConfigs shareGroupConfigs
	// catchUp fetches missing segments from peers on Restore (catchup.go).
	catchUp catchUpConfig
	// dedupScratch is reused by applyAppend, keyScratch by applyOne (Raft
	// goroutine only).
	dedupScratch []dedup.Key
	keyScratch   keyScratch
}

// Config configures an FSM. The zero value of each optional field has the
// documented default.
type Config struct {
	// Dir holds the topics' directories (<data>/topics). Required.
	Dir string
	// Log holds the partition logs' options.
	Log log.Options
	// Logger receives structured logs; default slog.Default().
	Logger *slog.Logger
	// Fatal is called when Apply hits an error it must not continue past
	// (an I/O error, an entry it cannot decode); nil: only logged. Either
	// way the FSM refuses every later entry (backend.ErrStopped).
	Fatal func(error)
	// Now measures durations for logs; never state. Default time.Now.
	Now func() time.Time
	// Self is this node's id: catch-up never fetches from it.
	Self string
	// Fetcher fetches segments a snapshot names but the local logs lack
	// (catchup.go); nil: such a snapshot is refused (backend.ErrNoSegmentSource).
	Fetcher SegmentFetcher
	// Peers, when set, lists the addresses catch-up fetches segments
	// from, instead of this state machine's node registry: a data group's
	// state machine holds no registry and asks the meta group's.
	Peers func() []string
	// Group is the data group this state machine runs: it opens only the
	// partitions a topic's placement puts in it (placement.go). Default 0,
	// the meta group, which is also data group 0 and hosts every
	// partition of a topic without a placement, as before data groups.
	Group uint64
}

// New makes an FSM over cfg.Dir. It opens nothing until Restore or the
// first command.
func New(cfg Config) *FSM {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	f := &FSM{root: cfg.Dir, group: cfg.Group, logOpts: cfg.Log, logger: cfg.Logger, fatal: cfg.Fatal, clock: cfg.Now,
		catchUp: catchUpConfig{self: cfg.Self, fetcher: cfg.Fetcher, peers: cfg.Peers}, topics: map[string]*Topic{},
		topicsNotify: make(chan struct{})}
	f.security.install(nil, nil, nil)
	return f
}

// AppendResult is the outcome of an applied Append: the base offset assigned
// to each batch, in command order.
type AppendResult struct {
	BaseOffsets []int64
	// Errors, when not nil, holds each batch's refusal by its partition's
	// producer state (nil where the batch was written or was a duplicate,
	// whose BaseOffsets entry is then the original's); the other batches
	// were written.
	Errors []error
	// Duplicates, when not nil, is true for each batch the producer state
	// found to repeat one of its producer's last batches: not written
	// again, its BaseOffsets entry the original's.
	Duplicates []bool
}

// Topic returns the named topic, or backend.ErrUnknownTopic.
func (f *FSM) Topic(name string) (*Topic, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.topics[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", backend.ErrUnknownTopic, name)
	}
	return t, nil
}

// TopicArrived returns a channel closed when the next topic arrives in
// this state machine (created, adopted by a data group, restored) or it
// closes: a long poll of a topic it has not adopted yet takes it before
// its read and waits on it.
func (f *FSM) TopicArrived() <-chan struct{} {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.topicsNotify
}

// topicsArrivedLocked wakes TopicArrived's waiters; f.mu is held for
// writing.
func (f *FSM) topicsArrivedLocked() {
	close(f.topicsNotify)
	f.topicsNotify = make(chan struct{})
}

// Partition returns one partition of a topic: a *PartitionElsewhereError
// when another data group hosts it (Topic.Partition).
func (f *FSM) Partition(topic string, p int32) (*Partition, error) {
	t, err := f.Topic(topic)
	if err != nil {
		return nil, err
	}
	return t.Partition(p)
}

// Group is the data group this state machine runs (Config.Group).
func (f *FSM) Group() uint64 { return f.group }

// Topics returns all topics sorted by name.
func (f *FSM) Topics() []*Topic {
	f.mu.RLock()
	out := make([]*Topic, 0, len(f.topics))
	for _, t := range f.topics {
		out = append(out, t)
	}
	f.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Now is the time of the last applied command (Unix nanoseconds), the
// state machine's clock.
func (f *FSM) Now() int64 { return f.now.Load() }

// AppliedIndex is the last Raft index applied by this FSM.
func (f *FSM) AppliedIndex() uint64 { return f.applied.Load() }

// Failed returns the fatal error that stopped this FSM, if any.
func (f *FSM) Failed() error {
	if p := f.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// Entry is one committed Raft log entry as the state machine sees it.
type Entry struct {
	Index uint64
	// Command is false for Raft's own entries (no-ops, configuration
	// changes): they only advance the applied index.
	Command bool
	// Data is the encoded command; Apply may alias it until the entry's
	// result is returned.
	Data []byte
}

// ApplyBatch applies committed entries in order, one result each. After a
// fatal error every later entry's result is backend.ErrStopped.
func (f *FSM) ApplyBatch(entries []Entry) []any {
	out := make([]any, len(entries))
	for i, e := range entries {
		if prev := f.applied.Load(); e.Index <= prev {
			// Raft hands each committed entry over once, in order (its
			// own entries, no-ops and barriers, leave gaps).
			f.logger.Error("entry applied again or out of order", "applied_index", prev, "index", e.Index)
		}
		if err := f.Failed(); err != nil {
			out[i] = fmt.Errorf("%w: %v", backend.ErrStopped, err)
			continue
		}
		if e.Command {
			out[i] = f.applyOne(e.Index, e.Data)
		}
		f.applied.Store(e.Index)
	}
	return out
}

func (f *FSM) applyOne(index uint64, data []byte) any {
	env, err := decodeCommandWith(data, &f.keyScratch)
	if err != nil {
		// Guessing would let replicas diverge: stop.
		return f.stop(fmt.Errorf("apply index %d: %w", index, err))
	}
	if env.Time > f.now.Load() {
		f.now.Store(env.Time)
	}
	if env.Level > f.AppliedLevel() {
		if err := f.raiseLevel(env.Level, f.now.Load()); err != nil {
			return f.stop(fmt.Errorf("apply index %d: %w", index, err))
		}
	}
	res := commands[env.Type].apply(f, index, f.now.Load(), env.Body)
	if f.logger.Enabled(context.Background(), slog.LevelDebug) {
		f.logger.Debug("applied", "index", index, "command", commands[env.Type].name, "result", resultSummary(res))
	}
	return res
}

// resultSummary is an applied command's result for the debug log, which
// lets the logs of two replicas be compared entry by entry.
func resultSummary(r any) string {
	switch r := r.(type) {
	case nil:
		return "ok"
	case error:
		return "error: " + r.Error()
	case AppendResult:
		return fmt.Sprint(r.BaseOffsets)
	}
	s := fmt.Sprintf("%+v", r)
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}

// stop records a fatal error and hands it to the node's fatal handler, which
// by default ends the process: an I/O error inside Apply must never be
// acknowledged, and a node must not continue with diverged state.
func (f *FSM) stop(err error) error {
	f.failed.CompareAndSwap(nil, &err)
	f.logger.Error("fatal error in apply; node stops", "err", err)
	if f.fatal != nil {
		f.fatal(err)
	}
	return fmt.Errorf("%w: %v", backend.ErrStopped, err)
}

// Close closes every partition log.
func (f *FSM) Close() error {
	f.cleaner.discardAll() // prepared on logs that are closing
	f.mu.Lock()
	defer f.mu.Unlock()
	var first error
	for _, t := range f.topics {
		if err := t.close(); err != nil && first == nil {
			first = err
		}
	}
	f.topics = map[string]*Topic{}
	f.topicsArrivedLocked()
	return first
}

// msDuration converts milliseconds to a Duration, saturating.
func msDuration(ms int64) time.Duration {
	if ms > int64(1<<63-1)/int64(time.Millisecond) {
		return time.Duration(1<<63 - 1)
	}
	return time.Duration(ms) * time.Millisecond
}
