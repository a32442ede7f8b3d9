package replication

import (
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

// raftSnapshots takes a backup's snapshot through a group's Raft.
type raftSnapshots struct {
	r *raft.Raft
	// snaps is the group's snapshot store and applied its state
	// machine's applied index: when the state machine applied nothing
	// since Raft's last snapshot, that snapshot is its state.
	snaps   raft.SnapshotStore
	applied func() uint64
}

// Snapshot implements catchup.Snapshotter.
func (s raftSnapshots) Snapshot() (*raft.SnapshotMeta, io.ReadCloser, error) {
	fut := s.r.Snapshot()
	if err := fut.Error(); errors.Is(err, raft.ErrNothingNewToSnapshot) {
		// Raft counts what it handed the state machine since it started
		// (a replica restarted that applied only a barrier since has
		// nothing new), so its latest snapshot holds the state now.
		return s.latest()
	} else if err != nil {
		return nil, nil, fmt.Errorf("snapshot: %w", mapRaftError(err))
	}
	meta, rc, err := fut.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("open snapshot: %w", err)
	}
	return meta, rc, nil
}

// latest opens the newest snapshot in the store, which must hold
// everything the state machine applied.
func (s raftSnapshots) latest() (*raft.SnapshotMeta, io.ReadCloser, error) {
	list, err := s.snaps.List()
	if err != nil {
		return nil, nil, fmt.Errorf("list snapshots: %w", err)
	}
	if len(list) == 0 || list[0].Index < s.applied() {
		return nil, nil, fmt.Errorf("snapshot: nothing new to snapshot, and no snapshot holds index %d", s.applied())
	}
	meta, rc, err := s.snaps.Open(list[0].ID)
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
