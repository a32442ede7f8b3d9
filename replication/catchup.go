package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/peer"
	"github.com/logd-dev/logd/replication/catchup"
	"github.com/logd-dev/logd/replication/fsm"
)

// The node's side of snapshot catch-up and backups, which live in package
// replication/catchup: what catchup needs of the node (its Raft
// snapshots, its state machine's segments, its peer TLS) is handed to it
// here.

// Backup writes a backup of this node's state (catchup.Backup), which
// must be the leader's (ErrNotLeader otherwise, so that it holds every
// write acknowledged before the call).
func (n *Node) Backup(ctx context.Context, start func(backend.BackupInfo) (io.Writer, error)) (backend.BackupInfo, error) {
	if !n.IsLeader() {
		return backend.BackupInfo{}, backend.ErrNotLeader
	}
	if !n.Ready() {
		return backend.BackupInfo{}, fmt.Errorf("%w: the leader has not applied its barrier yet", backend.ErrNotLeader)
	}
	// A backup is the meta group's snapshot and segments: the records of
	// topics placed over data groups are in those groups, not in it, and
	// so are the consumer groups whose home is a data group.
	for _, t := range n.fsm.Topics() {
		if t.Placement != nil {
			return backend.BackupInfo{}, fmt.Errorf("%w: topic %s is placed over data groups (--data-groups-per-node), whose records a backup would miss", backend.ErrBackupDataGroups, t.Name)
		}
	}
	if homes := n.fsm.DataGroupHomes(); len(homes) > 0 {
		return backend.BackupInfo{}, fmt.Errorf("%w: consumer groups are kept in data groups %v, whose offsets a backup would miss", backend.ErrBackupDataGroups, homes)
	}
	return catchup.Backup(ctx, catchup.BackupSource{
		Snapshots: raftSnapshots{n.raft}, Segments: n.fsm,
		NodeID: n.cfg.NodeID, Now: n.cfg.Now, Logger: n.cfg.Logger,
	}, start)
}

// moveBytesPerSecond is the move budget Config.MoveBytesPerSecond
// configures (0: unbounded).
func moveBytesPerSecond(r int64) int64 {
	switch {
	case r == 0:
		return catchup.DefaultMoveBytesPerSecond
	case r < 0:
		return 0
	default:
		return r
	}
}

// CatchUpStats counts the segment bytes this node copied from peers to
// build or catch up its replicas, in every group, and the time those
// copies waited for the move budget (Config.MoveBytesPerSecond).
func (n *Node) CatchUpStats() backend.CatchUpStats { return n.moves.Stats() }

// raftSnapshots takes a backup's snapshot through the node's Raft.
type raftSnapshots struct{ r *raft.Raft }

// Snapshot implements catchup.Snapshotter.
func (s raftSnapshots) Snapshot() (*raft.SnapshotMeta, io.ReadCloser, error) {
	fut := s.r.Snapshot()
	if err := fut.Error(); err != nil {
		return nil, nil, fmt.Errorf("snapshot: %w", mapRaftError(err))
	}
	meta, rc, err := fut.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("open snapshot: %w", err)
	}
	return meta, rc, nil
}

// SegmentHandler serves the segment files of this node to peers that
// catch up from a snapshot (catchup.NewSegmentHandler); mount it at
// catchup.SegmentPathPrefix. Under peer TLS (Config.PeerTLS) it answers
// only callers whose connection presented a verified node certificate,
// so the listener it is mounted on must verify client certificates of
// the cluster CA (PeerTLS.VerifiedNode); without peer TLS it answers
// callers that prove the cluster secret once it requires it (secret.go),
// and anyone before.
func (b *Backend) SegmentHandler() http.Handler {
	// A nil *PeerTLS in the interface would refuse every caller.
	var nodes catchup.NodeVerifier
	if p := b.cfg.PeerTLS; p != nil {
		nodes = p
	}
	return catchup.NewSegmentHandler(segmentRouter{b.Node}, nodes, b.requiredSecret, b.cfg.Logger)
}

// segmentRouter finds a segment a peer asks for in the meta group's state
// machine or, for a partition of a data group, in this node's replica of
// it.
type segmentRouter struct{ n *Node }

func (r segmentRouter) LookupSegment(topic string, topicIndex uint64, p int32, base int64) (fsm.ServedSegment, error) {
	seg, err := r.n.fsm.LookupSegment(topic, topicIndex, p, base)
	if err == nil || !errors.Is(err, backend.ErrPartitionElsewhere) && !errors.Is(err, backend.ErrUnknownTopic) && !errors.Is(err, backend.ErrSegmentGone) {
		return seg, err
	}
	for _, dg := range r.n.DataGroupReplicas() {
		if s, derr := dg.FSM.LookupSegment(topic, topicIndex, p, base); derr == nil {
			return s, nil
		}
	}
	return seg, err
}

// requiredSecret is the cluster secret once the node requires it, nil
// before: while a cluster is handed its secret, peers that do not hold it
// yet still catch up.
func (b *Backend) requiredSecret() []byte {
	if s, required := b.ClusterSecret(); required {
		return s
	}
	return nil
}

var (
	_ catchup.PeerTransport = peer.HTTP{}
	_ catchup.NodeVerifier  = (*peer.TLS)(nil)
	_ catchup.Segments      = (*fsm.FSM)(nil)
)
