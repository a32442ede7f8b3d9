package fsm

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/logd-dev/logd/backend"
)

// Backups (docs/operations.md): a backup holds, for the meta group and
// each data group holding partitions, a snapshot as Persist writes it
// plus the bytes of every segment its manifest lists, which package
// replication/catchup streams into a file (internal/backupfile). Restoring
// one is Restore with a SegmentFetcher that reads those bytes from the
// file instead of a peer, the path a follower takes when it catches up.
// This file reads what the backup side needs out of a snapshot, and
// rewrites a snapshot for a new cluster.

// maxManifestBytes bounds the JSON manifest a backup reads, so a damaged
// snapshot cannot make it buffer without limit.
const maxManifestBytes = 1 << 30

// SnapshotContents is what a snapshot's manifest says a backup must hold
// beside it.
type SnapshotContents struct {
	// Index is the Raft index the snapshot was taken at.
	Index uint64
	// Level is the highest feature level an applied entry needed.
	Level FeatureLevel
	// Group is the data group whose state machine took the snapshot (0:
	// the meta group and data group 0); only its state machines restore
	// it.
	Group uint64
	// Segments are the segments the manifest lists, in the order Restore
	// asks a SegmentFetcher for them: topics, then partitions, then
	// offsets, in manifest order.
	Segments []SnapshotSegment
	// Topics are the topics the snapshot holds, in manifest order.
	Topics []SnapshotTopic
}

// SnapshotTopic is one topic incarnation a snapshot holds: what a backup
// compares between the meta group's snapshot and the data groups'
// (docs/operations.md, "Backup and restore").
type SnapshotTopic struct {
	Name        string `json:"name"`
	CreateIndex uint64 `json:"create_index"`
	// Partitions is the topic's partition count.
	Partitions int `json:"partitions"`
	// Placement and PlacementEpoch are the topic's (Topic.Placement);
	// none for a topic without one.
	Placement      []uint64 `json:"placement,omitempty"`
	PlacementEpoch uint64   `json:"placement_epoch,omitempty"`
	// Hosted are the partitions the snapshot's state machine holds (not
	// elsewhere).
	Hosted []int32 `json:"hosted,omitempty"`
}

// SnapshotSegment is one segment a snapshot lists.
type SnapshotSegment struct {
	Topic      string
	TopicIndex uint64 // the topic's CreateIndex
	Partition  int32
	SegmentExtent
}

// ReadSnapshotManifest reads the manifest that opens a snapshot (its first
// line) from r, leaving r at the bytes that follow it, and returns the
// line as read and what it lists.
func ReadSnapshotManifest(r *bufio.Reader) ([]byte, SnapshotContents, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxManifestBytes {
			return nil, SnapshotContents{}, fmt.Errorf("snapshot manifest longer than %d bytes", maxManifestBytes)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return nil, SnapshotContents{}, fmt.Errorf("read snapshot manifest: %w", err)
		}
		break
	}
	var m manifest
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, SnapshotContents{}, fmt.Errorf("decode snapshot manifest: %w", err)
	}
	if m.Version != manifestVersion && m.Version != 1 {
		return nil, SnapshotContents{}, fmt.Errorf("%w: manifest version %d", backend.ErrUnknownCommand, m.Version)
	}
	c := SnapshotContents{Index: m.Index, Level: m.Level, Group: m.Group}
	for _, t := range m.Topics {
		st := SnapshotTopic{Name: t.Name, CreateIndex: t.CreateIndex, Partitions: len(t.Partitions), Placement: t.Placement, PlacementEpoch: t.PlacementEpoch}
		for p, pm := range t.Partitions {
			if !pm.Elsewhere {
				st.Hosted = append(st.Hosted, int32(p))
			}
			// Another data group's partition lists no segments.
			for _, s := range pm.Segments {
				c.Segments = append(c.Segments, SnapshotSegment{Topic: t.Name, TopicIndex: t.CreateIndex, Partition: int32(p),
					SegmentExtent: SegmentExtent(s)})
			}
		}
		c.Topics = append(c.Topics, st)
	}
	return line, c, nil
}

// ForNewCluster copies the meta group's snapshot read from r to w as the
// first snapshot of a new cluster of node alone, restored at restoredAt:
// the node registry is emptied, since the nodes it names belong to the
// cluster the backup was taken from (a new node that installs the
// snapshot must never fetch segments from them: they may hold other data
// past the backup's index), and the Kafka producer id allocator moves up
// to ProducerIDRestoreBase(restoredAt) at least, above the ids the
// backup's cluster may have handed out after the backup. The table of
// data groups, if any, places every group on node alone (its replicas and
// the replicas it starts with), with no move or drain in progress: the
// restore builds node's replica of each group the backup holds, and node
// starts the others empty (docs/operations.md, "Backup and restore"). The
// new cluster's nodes register as they start; everything else is copied
// as it is.
func ForNewCluster(w io.Writer, r io.Reader, restoredAt time.Time, node string) error {
	br := bufio.NewReaderSize(r, 64<<10)
	line, _, err := ReadSnapshotManifest(br)
	if err != nil {
		return err
	}
	var m manifest
	if err := json.Unmarshal(line, &m); err != nil {
		return fmt.Errorf("decode snapshot manifest: %w", err)
	}
	m.Nodes = &clusterManifest{Version: clusterManifestVersion, Nodes: []RegisteredNode{}}
	m.NextProducerID = max(m.NextProducerID, ProducerIDRestoreBase(restoredAt))
	if m.DataGroups != nil {
		for i := range m.DataGroups.Groups {
			g := &m.DataGroups.Groups[i]
			g.Replicas, g.Bootstrap, g.Move = []string{node}, []string{node}, nil
		}
		m.DataGroups.Nodes, m.DataGroups.Draining = []string{node}, nil
	}
	if err := json.NewEncoder(w).Encode(m); err != nil {
		return fmt.Errorf("write snapshot manifest: %w", err)
	}
	if _, err := io.Copy(w, br); err != nil {
		return fmt.Errorf("copy snapshot: %w", err)
	}
	return nil
}
