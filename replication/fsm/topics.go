package fsm

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/logd-dev/logd/dedup"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/partition"
)

// Topic is a topic as applied on this node. Its fields never change after
// creation; the partitions' logs change underneath.
type Topic struct {
	Name         string
	Config       map[string]string
	CreatedNanos int64
	// CreateIndex is the Raft index that created this incarnation of the
	// topic; it names the directory so a deleted topic's files can never be
	// mistaken for a later topic of the same name.
	CreateIndex uint64
	// CreatedBy is the principal that created the topic; empty for a
	// topic created before principals were recorded (SecurityLevel).
	CreatedBy string
	// Partitions holds every partition of the topic by index; a partition
	// another data group hosts is nil here (Placement says which group),
	// so read them through Topic.Partition.
	Partitions []*Partition
	// Placement is the data group of each partition, by index; nil when
	// every partition is in this state machine's group (every topic
	// before DataGroupLevel). PlacementEpoch orders placements of one
	// topic incarnation: a partition-adopt older than it is refused.
	Placement      []uint64
	PlacementEpoch uint64
	// group is the data group of the state machine that holds this Topic
	// value (Config.Group).
	group uint64
	dir   string
	// dedup holds the topic's idempotency keys (nil until opened).
	dedup *dedup.Window
}

// Dedup returns the topic's idempotency window.
func (t *Topic) Dedup() *dedup.Window { return t.dedup }

// IdempotencyWindow is how long the topic remembers idempotency keys, in
// nanoseconds.
func (t *Topic) IdempotencyWindow() int64 {
	return int64(msDuration(configInt(t.Config, ConfigIdempotencyWindowMs)))
}

// MaxBatchBytes is the largest record batch the topic accepts.
func (t *Topic) MaxBatchBytes() int64 { return configInt(t.Config, ConfigMaxMessageBytes) }

// Partition is one partition's log plus a way to wait for appends.
type Partition struct {
	Topic string
	Index int32
	log   *log.Log
	// next is the offset the next append gets, as the FSM sees it: it
	// advances on every applied append, including appends skipped on
	// replay because the log already holds them, so a replayed entry
	// knows its offsets. Only the FSM goroutine touches it.
	next int64

	// producers is the partition's idempotent producers (producers.go);
	// only the FSM goroutine touches it.
	producers producerState

	// unsynced counts the batch bytes appended since the last sync of the
	// log began (SyncDirty, Snapshot.Persist): Apply adds, the syncing
	// goroutine takes them.
	unsynced atomic.Int64

	mu sync.Mutex
	// notify is closed (and replaced) after every append; guarded by mu.
	notify chan struct{}
}

// unwritten reports whether the batch an entry at index appends at base
// is missing from the log, so must be written: the log holds every batch
// of entries before its applied index, and of the entry at it those that
// start before its end. An append-many entry may write several batches to
// one partition at one index; a crash between them (or a torn tail that
// recovery cut) leaves the log at that index with the later ones missing,
// and the replay writes exactly those.
func (p *Partition) unwritten(index uint64, base int64) bool {
	applied := p.log.AppliedIndex()
	return index > applied || index == applied && p.log.EndOffset() == base
}

// Log returns the partition's log, for reads. Writes go through Raft only.
func (p *Partition) Log() *log.Log { return p.log }

// Changed returns a channel that is closed at the next append (or when the
// partition is closed), for long polls.
func (p *Partition) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.notify
}

func (p *Partition) signal() {
	p.mu.Lock()
	close(p.notify)
	p.notify = make(chan struct{})
	p.mu.Unlock()
}

// topicDirName is "<name>~<createIndex>"; '~' cannot occur in a topic name.
func topicDirName(name string, createIndex uint64) string {
	return name + "~" + strconv.FormatUint(createIndex, 10)
}

// parseTopicDirName is the inverse of topicDirName.
func parseTopicDirName(s string) (name string, createIndex uint64, ok bool) {
	i := strings.LastIndexByte(s, '~')
	if i <= 0 {
		return "", 0, false
	}
	idx, err := strconv.ParseUint(s[i+1:], 10, 64)
	if err != nil || partition.ValidateTopicName(s[:i]) != nil {
		return "", 0, false
	}
	return s[:i], idx, true
}

// openTopic opens (creating if needed) every partition log of a topic.
func openTopic(root string, t *Topic, partitions int32, base log.Options) error {
	if err := partition.ValidateTopicName(t.Name); err != nil {
		return err
	}
	t.dir = filepath.Join(root, topicDirName(t.Name, t.CreateIndex))
	if err := reviveDeletedDir(t.dir); err != nil {
		return fmt.Errorf("revive files of %s: %w", t.Name, err)
	}
	t.dedup = dedup.NewWindow(int(configInt(t.Config, ConfigIdempotencyMaxKeys)))
	if err := t.openPartitions(partitions, base); err != nil {
		t.close()
		return err
	}
	return nil
}

// openPartitions opens (creating if needed) the logs of partitions
// len(t.Partitions) to n-1 that this data group hosts (t.hosts) and
// appends them to t.Partitions, nil for the others; on an error
// the logs it opened are closed again and t.Partitions is as before.
// Partition p's directory is "<topic dir>/<p>", so a partition added by a
// growth replayed after a restart finds the data it held.
func (t *Topic) openPartitions(n int32, base log.Options) error {
	have := len(t.Partitions)
	for p := int32(have); p < n; p++ {
		if !t.hosts(p) {
			// Another data group's: no directory, no log.
			t.Partitions = append(t.Partitions, nil)
			continue
		}
		np, err := t.openPartition(p, base)
		if err != nil {
			for _, opened := range t.Partitions[have:] {
				if opened != nil {
					opened.log.Close()
				}
			}
			t.Partitions = t.Partitions[:have]
			return err
		}
		t.Partitions = append(t.Partitions, np)
	}
	return nil
}

// openPartition opens (creating if needed) the log of partition p.
func (t *Topic) openPartition(p int32, base log.Options) (*Partition, error) {
	opts := base
	// The config check refuses larger values; clamped anyway (as alter
	// does), because the log refusing them here would stop the node.
	opts.SegmentBytes = min(configInt(t.Config, ConfigSegmentBytes), maxSegmentBytes)
	// max.message.bytes is checked before Apply writes (validateAppend),
	// by the config at the entry's index; the log's bound is only the cap,
	// so a raised max.message.bytes needs no reopening.
	opts.MaxBatchBytes = maxAppendBatchBytes
	// segment.ms is applied by age against the command time.
	opts.SegmentMaxAge = msDuration(configInt(t.Config, ConfigSegmentMs))
	l, err := log.Open(filepath.Join(t.dir, strconv.Itoa(int(p))), opts)
	if err != nil {
		return nil, fmt.Errorf("open %s-%d: %w", t.Name, p, err)
	}
	return &Partition{Topic: t.Name, Index: p, log: l, notify: make(chan struct{})}, nil
}

// close closes every partition log and wakes long polls.
func (t *Topic) close() error {
	var first error
	for _, p := range t.Partitions {
		if p == nil {
			continue
		}
		if err := p.log.Close(); err != nil && first == nil {
			first = err
		}
		p.signal()
	}
	return first
}

// remove closes the topic and sets its files aside as deleted at index:
// the directory is renamed "<dir>.deleted-<index>" and removed only once a
// snapshot at or past index is persisted. Until then a restore from an
// older snapshot (which still lists the topic) finds the files again, and
// the deletion is replayed from the Raft log after it.
func (t *Topic) remove(index uint64) error {
	t.close()
	if t.dir == "" {
		return nil
	}
	err := os.Rename(t.dir, t.dir+deletedSuffix+strconv.FormatUint(index, 10))
	if os.IsNotExist(err) {
		return nil // a sparse topic hosting no partition here has no files
	}
	if err != nil {
		return fmt.Errorf("set aside files of deleted topic %s: %w", t.Name, err)
	}
	return nil
}

// deletedSuffix marks the directory of a deleted topic awaiting removal.
const deletedSuffix = ".deleted-"

// reviveDeletedDir renames a deleted-topic directory back to dir when dir
// is missing, for a restore or replay that starts before the deletion.
func reviveDeletedDir(dir string) error {
	if _, err := os.Stat(dir); err == nil || !os.IsNotExist(err) {
		return nil
	}
	matches, err := filepath.Glob(dir + deletedSuffix + "*")
	if err != nil || len(matches) == 0 {
		return err
	}
	sort.Strings(matches)
	return os.Rename(matches[len(matches)-1], dir)
}

// purgeDeletedTopicDirs removes directories of topics deleted at or before
// index: no restore needs them once a snapshot at index is durable.
func purgeDeletedTopicDirs(root string, index uint64, logger *slog.Logger) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		i := strings.LastIndex(e.Name(), deletedSuffix)
		if i < 0 {
			continue
		}
		deleted, err := strconv.ParseUint(e.Name()[i+len(deletedSuffix):], 10, 64)
		if err != nil || deleted > index {
			continue
		}
		if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
			logger.Warn("remove files of a deleted topic", "dir", e.Name(), "err", err)
		}
	}
}

func partitionDedupEntry(k RecordKey, p int32, base, expires int64) dedup.Entry {
	return dedup.Entry{Digest: k.Digest, Partition: p, Offset: base + int64(k.Index), Expires: expires}
}
