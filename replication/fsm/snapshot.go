package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/dedup"

	"github.com/logd-dev/logd/internal/failpoint"
)

// manifestVersion is the snapshot format version. Version 2 follows the
// JSON manifest with each topic's idempotency window in binary, in topic
// order (topicManifest.DedupBytes long); version 1 kept the windows inside
// the JSON, base64-encoded, which at 100k keys cost more CPU per snapshot
// than the rest of it together. Restore reads both.
const manifestVersion = 2

// maxDedupSnapshotBytes bounds one topic's window section, so a damaged
// length cannot make Restore allocate without limit.
const maxDedupSnapshotBytes = 1 << 36

// manifest is the whole snapshot: metadata and, per partition, the segment
// list and applied index. Segment bytes are not in the snapshot; they are
// fsynced before the snapshot is taken and stay in the partition logs.
type manifest struct {
	Version int    `json:"version"`
	Index   uint64 `json:"index"`
	Now     int64  `json:"now"`
	// Level is the highest feature level an applied entry needed
	// (AppliedLevel); absent from snapshots of builds before
	// CompressionLevel, which read nothing by it.
	Level  FeatureLevel    `json:"level,omitempty"`
	Topics []topicManifest `json:"topics"`
	Groups *groupsManifest `json:"groups,omitempty"`
	// Queues holds the queue groups' lease state (versioned on its own).
	Queues *queueManifest `json:"queues,omitempty"`
	// Nodes is the registry of client API addresses (cluster_state.go).
	Nodes *clusterManifest `json:"nodes,omitempty"`
	// Cleaner holds each partition's last cleaner run (versioned on its
	// own; cleaner_snapshot.go).
	Cleaner *cleanerManifest `json:"cleaner,omitempty"`
	// Security holds the tokens and ACLs (versioned on its own;
	// security_state.go).
	Security *securityManifest `json:"security,omitempty"`
	// Redrives holds the redrive jobs (redrive_state.go); their positions
	// are in Groups.
	Redrives *redriveManifest `json:"redrives,omitempty"`
	// ShareConfigs holds the Kafka share groups' settings
	// (share_configs.go); absent when none is set, and before
	// ShareConfigLevel.
	ShareConfigs *shareConfigsManifest `json:"share_configs,omitempty"`
	// NextProducerID is the Kafka producer id the allocator hands out next
	// (apply_producer_init.go); absent before ProducerLevel.
	NextProducerID int64 `json:"next_producer_id,omitempty"`
	// DataGroups is the meta group's table of data groups
	// (data_groups.go); absent before DataGroupLevel.
	DataGroups *dataGroupsManifest `json:"data_groups,omitempty"`
	// Group is the data group of the state machine that took the snapshot
	// (Config.Group); a state machine of another group refuses it. Absent
	// for group 0 and before DataGroupLevel.
	Group uint64 `json:"group,omitempty"`
}

type topicManifest struct {
	Name         string            `json:"name"`
	Config       map[string]string `json:"config"`
	CreatedNanos int64             `json:"created_nanos"`
	CreateIndex  uint64            `json:"create_index"`
	CreatedBy    string            `json:"created_by,omitempty"`
	// Partitions lists every partition by index, those another data group
	// hosts as Elsewhere entries.
	Partitions []partitionManifest `json:"partitions"`
	// Placement and PlacementEpoch are the topic's (placement.go); absent
	// for a topic without a placement.
	Placement      []uint64 `json:"placement,omitempty"`
	PlacementEpoch uint64   `json:"placement_epoch,omitempty"`
	// Dedup is the topic's idempotency window, oldest key first, in
	// the window encoding of dedup.View.WriteTo (manifest version 1
	// only).
	Dedup []byte `json:"dedup,omitempty"`
	// DedupBytes is the length of the window's section after the manifest
	// (version 2).
	DedupBytes int64 `json:"dedup_bytes,omitempty"`
}

type partitionManifest struct {
	// Elsewhere marks a partition another data group hosts: this state
	// machine has no log for it, and the other fields are zero.
	Elsewhere bool  `json:"elsewhere,omitempty"`
	Start     int64 `json:"start"`
	// End is the state machine's end offset at the snapshot's index. The
	// log may hold more while a restart replays entries it already has.
	End          int64             `json:"end"`
	AppliedIndex uint64            `json:"applied_index"`
	Segments     []segmentManifest `json:"segments"`
	// Producers is the partition's idempotent producers live at the
	// snapshot's time, by id (producers.go).
	Producers []producerManifest `json:"producers,omitempty"`
}

type segmentManifest struct {
	Base  int64 `json:"base"`
	End   int64 `json:"end"`
	Bytes int64 `json:"bytes"`
}

// Snapshot captures the manifest and freezes each topic's idempotency
// window. It runs on the FSM goroutine, between applies, so the manifest
// and the data agree exactly; its cost does not grow with the number of
// keys held (a window is frozen in O(keys/1024), see dedup.Window.View).
// Persist then syncs the partition logs and encodes the windows, while
// applies go on.
func (f *FSM) Snapshot() (*Snapshot, error) {
	if err := f.Failed(); err != nil {
		return nil, fmt.Errorf("%w: %v", backend.ErrStopped, err)
	}
	f.segmentsChanged.Store(false)
	f.snapshotted.Store(true)
	m := manifest{Version: manifestVersion, Index: f.applied.Load(), Now: f.now.Load(), Level: f.AppliedLevel(), NextProducerID: f.nextProducerID,
		DataGroups: f.dataGroupsSnapshot(), Group: f.group}
	f.resetSinceSnapshot(m.Index)
	var (
		syncs  []*Partition
		dedups []*dedup.View
	)
	for _, t := range f.Topics() {
		dedups = append(dedups, t.dedup.View())
		tm := topicManifest{Name: t.Name, Config: t.Config, CreatedNanos: t.CreatedNanos, CreateIndex: t.CreateIndex, CreatedBy: t.CreatedBy,
			Placement: t.Placement, PlacementEpoch: t.PlacementEpoch}
		for _, p := range t.Partitions {
			if p == nil {
				tm.Partitions = append(tm.Partitions, partitionManifest{Elsewhere: true})
				continue
			}
			syncs = append(syncs, p)
			pm := partitionManifest{Start: p.log.StartOffset(), End: p.next, AppliedIndex: p.log.AppliedIndex(), Producers: p.producers.snapshot(m.Now)}
			for _, s := range p.log.Segments() {
				pm.Segments = append(pm.Segments, segmentManifest{Base: s.BaseOffset, End: s.EndOffset, Bytes: s.Bytes})
			}
			tm.Partitions = append(tm.Partitions, pm)
		}
		m.Topics = append(m.Topics, tm)
	}
	m.Groups = f.groups.snapshot()
	m.Queues = f.snapshotQueues()
	m.Nodes = f.nodes.snapshot()
	m.Cleaner = f.snapshotCleaner()
	m.Security = f.snapshotSecurity()
	m.Redrives = f.snapshotRedrives()
	m.ShareConfigs = f.snapshotShareConfigs()
	return &Snapshot{m: m, dedups: dedups, root: f.root, logger: f.logger, syncs: syncs, fsm: f}, nil
}

// Snapshot is a state captured by FSM.Snapshot, to be written by Persist
// (on any goroutine, while applies go on) and released by Release.
type Snapshot struct {
	m manifest
	// dedups are the topics' frozen windows, in manifest order; Persist
	// encodes them, Release releases them.
	dedups []*dedup.View
	root   string
	logger *slog.Logger
	// syncs are the partitions to fsync before the manifest is written.
	syncs []*Partition
	// fsm is told the size of the windows written (windowBytes) once the
	// snapshot is durable.
	fsm         *FSM
	windowBytes int64
}

// Index is the Raft index the snapshot captures.
func (s *Snapshot) Index() uint64 { return s.m.Index }

// Persist writes the snapshot to w as Restore reads it; the caller makes
// it durable, then calls Durable.
//
// First it fsyncs every partition log, here rather than in Snapshot so the
// FSM goroutine keeps applying while the disk catches up: a log's Sync
// holds up no append (log.Log.Sync), and SyncDirty has usually synced all
// but the last few MiB. The manifest's data is all below what
// the logs hold now, so it is durable when the manifest is. A log closed
// meanwhile (its topic deleted) was synced by Close. A failed fsync fails
// the snapshot, so Raft keeps its log, and leaves the log refusing appends,
// so the next apply stops the node.
func (s *Snapshot) Persist(w io.Writer) error {
	for _, p := range s.syncs {
		if err := p.sync(); err != nil {
			return err
		}
	}
	failpoint.Inject("fsmSnapshotPersist")
	return s.writeTo(w)
}

// Durable tells the FSM that what Persist wrote is durable: the files of
// topics deleted at or before the snapshot's index are no longer needed by
// any restore, and are removed.
func (s *Snapshot) Durable() {
	if s.fsm != nil {
		s.fsm.windowBytes.Store(s.windowBytes)
	}
	purgeDeletedTopicDirs(s.root, s.m.Index, s.logger)
}

// writeTo writes the snapshot as Restore reads it: the JSON manifest and a
// newline, then each topic's idempotency window section.
func (s *Snapshot) writeTo(w io.Writer) error {
	var windows int64
	for i, d := range s.dedups {
		s.m.Topics[i].DedupBytes = d.Len()
		windows += s.m.Topics[i].DedupBytes
	}
	s.windowBytes = windows
	if err := json.NewEncoder(w).Encode(s.m); err != nil {
		return err
	}
	for i, d := range s.dedups {
		if n, err := d.WriteTo(w); err != nil {
			return fmt.Errorf("idempotency window of %s: %w", s.m.Topics[i].Name, err)
		} else if n != s.m.Topics[i].DedupBytes {
			return fmt.Errorf("idempotency window of %s: wrote %d bytes, expected %d", s.m.Topics[i].Name, n, s.m.Topics[i].DedupBytes)
		}
	}
	return nil
}

// Release releases the frozen idempotency windows.
func (s *Snapshot) Release() {
	for _, d := range s.dedups {
		d.Release()
	}
}

// Restore replaces the FSM's state with a snapshot's. Local partition data
// is kept where the snapshot describes it: the logs are reopened and must
// hold at least what the manifest lists. Directories of topics the snapshot
// does not know and that were created at or before its index belong to
// deleted topics and are removed; newer ones are kept for the replay of the
// Raft log that follows.
func (f *FSM) Restore(rc io.Reader) error {
	var m manifest
	dec := json.NewDecoder(rc)
	if err := dec.Decode(&m); err != nil {
		return fmt.Errorf("restore: decode manifest: %w", err)
	}
	if m.Version != manifestVersion && m.Version != 1 {
		return fmt.Errorf("restore: %w: manifest version %d", backend.ErrUnknownCommand, m.Version)
	}
	if m.Group != f.group {
		return fmt.Errorf("restore: a snapshot of data group %d, this state machine runs group %d", m.Group, f.group)
	}
	for _, tm := range m.Topics {
		if err := checkPlacementManifest(tm, f.group); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
	// The window sections follow the manifest (version 2); decode them all,
	// straight into new windows, before changing anything.
	sections := io.MultiReader(dec.Buffered(), rc)
	if m.Version >= 2 {
		var nl [1]byte // json.Encoder ends the manifest with a newline
		if _, err := io.ReadFull(sections, nl[:]); err != nil && err != io.EOF || err == nil && nl[0] != '\n' {
			return fmt.Errorf("restore: no newline after the manifest")
		}
	}
	windows := make([]*dedup.Window, len(m.Topics))
	for i := range m.Topics {
		tm := &m.Topics[i]
		maxKeys := int(configInt(tm.Config, ConfigIdempotencyMaxKeys))
		var err error
		switch {
		case m.Version == 1:
			windows[i], err = dedup.ReadWindow(bytes.NewReader(tm.Dedup), int64(len(tm.Dedup)), maxKeys)
		case tm.DedupBytes < 0 || tm.DedupBytes > maxDedupSnapshotBytes:
			return fmt.Errorf("restore: %s: idempotency window of %d bytes", tm.Name, tm.DedupBytes)
		default:
			windows[i], err = dedup.ReadWindow(sections, tm.DedupBytes, maxKeys)
		}
		if err != nil {
			return fmt.Errorf("restore: %s: idempotency window: %w", tm.Name, err)
		}
	}
	producers := make([][]producerState, len(m.Topics))
	for i, tm := range m.Topics {
		producers[i] = make([]producerState, len(tm.Partitions))
		for j, pm := range tm.Partitions {
			ps, err := restoreProducers(pm.Producers)
			if err != nil {
				return fmt.Errorf("restore: %s-%d: producers: %w", tm.Name, j, err)
			}
			producers[i][j] = ps
		}
	}
	if m.NextProducerID < 0 {
		return fmt.Errorf("restore: next producer id %d", m.NextProducerID)
	}
	if err := checkDataGroupsManifest(m.DataGroups); err != nil {
		return err
	}
	tokens, acls, scram, err := decodeSecurity(m.Security)
	if err != nil {
		return err
	}
	shareConfigs, err := decodeShareConfigs(m.ShareConfigs)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("restore: close current state: %w", err)
	}
	// Peers' addresses first: catch-up fetches missing segments from them.
	if err := f.nodes.restore(m.Nodes); err != nil {
		return err
	}
	topics := map[string]*Topic{}
	keep := map[string]bool{}
	changed := false
	ahead := 0 // partitions holding entries past the snapshot, replayed next
	for ti, tm := range m.Topics {
		t := &Topic{Name: tm.Name, Config: tm.Config, CreatedNanos: tm.CreatedNanos, CreateIndex: tm.CreateIndex, CreatedBy: tm.CreatedBy,
			Placement: tm.Placement, PlacementEpoch: tm.PlacementEpoch, group: f.group}
		if err := openTopic(f.root, t, int32(len(tm.Partitions)), f.logOpts); err != nil {
			closeAll(topics)
			return fmt.Errorf("restore: %w", err)
		}
		topics[t.Name] = t
		keep[topicDirName(t.Name, t.CreateIndex)] = true
		ch, err := f.catchUpTopic(t, tm, m.Index)
		if err != nil {
			closeAll(topics)
			return fmt.Errorf("restore: %w", err)
		}
		changed = changed || ch
		t.dedup = windows[ti]
		for i, pm := range tm.Partitions {
			if pm.Elsewhere {
				continue
			}
			t.Partitions[i].next = pm.End
			t.Partitions[i].producers = producers[ti][i]
			l := t.Partitions[i].log
			if l.EndOffset() < pm.End {
				closeAll(topics)
				return fmt.Errorf("restore: %w: %s-%d ends at %d, snapshot at index %d has %d",
					backend.ErrSnapshotAhead, t.Name, i, l.EndOffset(), m.Index, pm.End)
			}
			if l.EndOffset() > pm.End {
				ahead++
			}
		}
	}
	if err := f.removeStaleTopicDirs(keep, m.Index); err != nil {
		closeAll(topics)
		return err
	}
	purgeDeletedTopicDirs(f.root, m.Index, f.logger)
	if err := f.groups.restore(m.Groups); err != nil {
		closeAll(topics)
		return err
	}
	if err := f.restoreQueues(m.Queues); err != nil {
		closeAll(topics)
		return err
	}
	if err := f.restoreCleaner(m.Cleaner); err != nil {
		closeAll(topics)
		return err
	}
	f.mu.Lock()
	f.topics = topics
	f.topicsArrivedLocked()
	f.mu.Unlock()
	f.security.install(tokens, acls, scram)
	f.restoreRedrives(m.Redrives)
	f.installShareConfigs(shareConfigs)
	f.now.Store(m.Now)
	f.level.Store(uint32(m.Level))
	f.nextProducerID = m.NextProducerID
	f.restoreDataGroups(m.DataGroups)
	f.applied.Store(m.Index)
	f.resetSinceSnapshot(m.Index)
	f.segmentsChanged.Store(changed)
	f.snapshotted.Store(true)
	f.logger.Info("snapshot restored", "index", m.Index, "topics", len(m.Topics), "partitions_ahead", ahead)
	return nil
}

func (f *FSM) removeStaleTopicDirs(keep map[string]bool, index uint64) error {
	entries, err := os.ReadDir(f.root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("restore: list topics: %w", err)
	}
	for _, e := range entries {
		_, created, ok := parseTopicDirName(e.Name())
		if !ok || keep[e.Name()] || created > index {
			continue
		}
		f.logger.Info("removing files of a deleted topic", "dir", e.Name())
		if err := os.RemoveAll(filepath.Join(f.root, e.Name())); err != nil {
			return fmt.Errorf("restore: remove %s: %w", e.Name(), err)
		}
	}
	return nil
}

func closeAll(topics map[string]*Topic) {
	for _, t := range topics {
		t.close()
	}
}

// BytesSinceSnapshot is how many batch bytes were appended since the last
// snapshot was taken.
func (f *FSM) BytesSinceSnapshot() int64 { return f.bytesSinceSnapshot.Load() }

// SinceSnapshot is how many Raft entries were applied (all of them after a
// start without a snapshot) and how many batch bytes appended since the
// last snapshot taken or restored. The two are read together: a reader
// between a snapshot's two resets would see the entries from before it
// with the bytes from after it, an average entry size of nothing.
func (f *FSM) SinceSnapshot() (entries uint64, bytes int64) {
	f.sinceMu.Lock()
	defer f.sinceMu.Unlock()
	applied, snap := f.applied.Load(), f.snapshotIndex.Load()
	if applied > snap {
		entries = applied - snap
	}
	return entries, f.bytesSinceSnapshot.Load()
}

// resetSinceSnapshot starts SinceSnapshot's counts again at the snapshot
// of Raft index index.
func (f *FSM) resetSinceSnapshot(index uint64) {
	f.sinceMu.Lock()
	defer f.sinceMu.Unlock()
	f.snapshotIndex.Store(index)
	f.bytesSinceSnapshot.Store(0)
}

// SegmentsChangedSinceSnapshot reports whether the latest snapshot taken
// (or restored) lists segments that applied compactions or trims have
// since replaced or deleted, or a node registry a registration has since
// changed, so a follower installing it could not fetch them (catchup.go).
func (f *FSM) SegmentsChangedSinceSnapshot() bool { return f.segmentsChanged.Load() }

// WindowBytes is the size of the idempotency windows the last durable
// snapshot wrote.
func (f *FSM) WindowBytes() int64 { return f.windowBytes.Load() }

// checkPlacementManifest checks that a snapshot's topic marks Elsewhere
// exactly the partitions its placement puts in groups other than group.
func checkPlacementManifest(tm topicManifest, group uint64) error {
	if tm.Placement != nil && len(tm.Placement) != len(tm.Partitions) {
		return fmt.Errorf("%s: placement of %d partitions for %d", tm.Name, len(tm.Placement), len(tm.Partitions))
	}
	for i, pm := range tm.Partitions {
		if here := tm.Placement == nil || tm.Placement[i] == group; pm.Elsewhere == here {
			return fmt.Errorf("%s-%d: placement and manifest disagree on whether data group %d hosts it", tm.Name, i, group)
		}
	}
	return nil
}
