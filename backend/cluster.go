package backend

import (
	"context"
	"time"

	"github.com/logd-dev/logd/internal/backupfile"
)

// Status is a node's view of the Raft group.
type Status struct {
	NodeID       string
	State        string
	LeaderID     string
	LeaderAddr   string
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64
	LastLogIndex uint64
	Members      []Member
	// BuildLevel is the feature level this node registers (its build's,
	// or Config.FeatureLevel). AppliedLevel is the highest level an
	// applied entry needed (the state machine's), which decides how
	// entries apply. ClusterLevel is the lowest level a member of the
	// configuration registered, this node counting at BuildLevel: what
	// this node may propose now; BaseLevel when the
	// configuration cannot be read.
	BuildLevel, AppliedLevel, ClusterLevel FeatureLevel
	// DataGroups are the cluster's data groups as the meta group places
	// them, with this node's replica of each it holds.
	DataGroups []DataGroupStatus
}

// DataGroupStatus is one data group: where the meta group places it and,
// when this node holds a replica, what that replica knows.
type DataGroupStatus struct {
	ID uint64
	// Replicas are the nodes the meta group places the group on, the
	// preferred leader first.
	Replicas []string
	// State is this node's replica's Raft state ("Leader", "Follower",
	// "Candidate"); "" when this node runs no replica of the group.
	State string
	// LeaderID, Term, CommitIndex and AppliedIndex are this node's
	// replica's (zero without one).
	LeaderID                        string
	Term, CommitIndex, AppliedIndex uint64
	// Voters are the voters of the group's configuration as this node's
	// replica knows it.
	Voters []string
	// Followers are, when this node's replica leads the group, what each
	// other voter last answered it; empty elsewhere.
	Followers []FollowerStats
	// Partitions the meta group places in the group; Bytes of their logs
	// in this node's replica (0 without one).
	Partitions int
	Bytes      int64
	// Move is the change of the group's replicas in progress, as the
	// table marks it; nil when none.
	Move *ReplicaMove
}

// Member is one server of the Raft configuration.
type Member struct {
	ID       string
	Address  string
	Suffrage string
	// FeatureLevel is the level the member registered in the node
	// registry; the base level, 1 when it registered none.
	FeatureLevel FeatureLevel
}

// JoinRequest asks the leader to add a node.
type JoinRequest struct {
	ID          string
	RaftAddress string
	APIAddress  string
	// FeatureLevel is the highest feature level the node's build
	// understands (its build's level); 0 when not known, which counts as
	// the base level, 1.
	FeatureLevel FeatureLevel
	// PeerAddress, if set, is where the node serves node-to-node HTTP
	// (Config.PeerAdvertise): the leader asks the node there, and
	// registers it. KafkaAddress, if set, is its advertised Kafka
	// address, registered with it. Builds before them send neither.
	PeerAddress  string
	KafkaAddress string
	// RegisterOnly: the node is a member and asks only that its
	// addresses and feature level be registered (a node that restarted
	// with a new build or address); the leader never adds or
	// promotes it, and refuses one that is not a member
	// (ErrUnknownNode).
	RegisterOnly bool
	// SecretOnly: the node asks only for the cluster secret before it
	// joins (docs/security.md, "Peers"); the front end answers it with
	// ClusterAPI.ClusterSecret and changes nothing. Older leaders ignore
	// it and take the call for a join.
	SecretOnly bool
	// SecretFingerprint names the cluster secret the node holds (never
	// the secret), registered with its addresses; "" for none.
	SecretFingerprint string
	// CallerNodeID and ForwardedBy say who asked, under peer TLS
	// (Config.PeerTLS); the front end fills them from the connection the
	// call arrived on (PeerTLS.VerifiedNode). CallerNodeID is the node id
	// of the verified node certificate the caller presented, "" for none.
	// On a call another node forwarded, ForwardedBy is that node's id
	// (its connection's certificate), and CallerNodeID what it found on
	// its own caller's connection. The leader adds a node only for a
	// caller that proved to be that node (checkJoinCaller).
	CallerNodeID string
	ForwardedBy  string
}

// NodeReport is what a node says of itself (its Status).
type NodeReport struct {
	ID           string
	Ready        bool
	AppliedIndex uint64
	LeaderID     string
	Term         uint64
}

// NodeProbe asks the node called at addr (its peer address, or its client
// API address when it has none) for its report. The front end implements
// it over the client API, as it implements AskJoin; an error means the
// node did not answer.
type NodeProbe func(ctx context.Context, addr string) (NodeReport, error)

// TimingBounds are the upper bounds of Timings' buckets: 100µs doubling to
// about 13 s.
func TimingBounds() []time.Duration {
	b := make([]time.Duration, 18)
	for i := range b {
		b[i] = 100 * time.Microsecond << i
	}
	return b
}

// Timings is a histogram of durations: Count observations summing to Sum,
// Buckets[i] of them at most TimingBounds()[i] (cumulative).
type Timings struct {
	Count   uint64
	Sum     time.Duration
	Buckets []uint64
}

// FollowerStats is what the leader last heard from one follower.
type FollowerStats struct {
	// ID is the follower's node id.
	ID string
	// LastContact is when the follower last answered an AppendEntries
	// (a heartbeat at least every tenth of the heartbeat timeout); zero
	// if it has not answered this leader.
	LastContact time.Time
	// LastIndex is the last index of the follower's Raft log, as it last
	// answered.
	LastIndex uint64
}

// RaftMetrics are a node's Raft measurements since it opened.
type RaftMetrics struct {
	// Apply times the state machine's application of each batch of
	// committed entries.
	Apply Timings
	// StoreLogs times the Raft log store's writes (the leader's and the
	// followers'), each durable (fsynced) when it returns.
	StoreLogs Timings
	// SnapshotPersist times writing each snapshot to the snapshot store,
	// segment fsyncs included; SnapshotBytes is the size of the last one.
	SnapshotPersist Timings
	SnapshotBytes   uint64
	// LeaderChanges counts the leaders this node has seen elected
	// (itself included), each new term's leader once.
	LeaderChanges uint64
	// LastIndex is the last index of this node's Raft log.
	LastIndex uint64
	// Followers is, on the leader, one entry per other member of the
	// configuration, by id; empty on a follower.
	Followers []FollowerStats
}

// DiskUsage is the file system holding a node's data directory, in bytes.
type DiskUsage struct {
	// Total is the file system's size; Free what is free on it; Avail
	// what of that an unprivileged process may use (less the root
	// reserve), what logd can still write.
	Total, Free, Avail uint64
}

// CatchUpStats are this node's copies of segment bytes from peers, which
// build or catch up its replicas (snapshot catch-up, package
// replication/catchup), and their budget (replication.Config's
// MoveBytesPerSecond).
type CatchUpStats struct {
	// Bytes counts the segment bytes read from peers, in every group.
	Bytes int64
	// ThrottleWait is the time those reads spent waiting for the budget.
	ThrottleWait time.Duration
	// BytesPerSecond is the budget; 0: unbounded.
	BytesPerSecond int64
}

// CleanerStats are this node's cleaner measurements (the leader's work:
// planning and preparing compactions outside the FSM goroutine).
type CleanerStats struct {
	Runs             int64         // passes over every partition
	Prepared         int64         // compactions prepared
	PreparedBytes    int64         // their input bytes
	PrepareDuration  time.Duration // total time spent preparing
	PassDuration     time.Duration // total time of every pass
	LastPassDuration time.Duration
}

// TokenInfo is what may be shown of a token: its verifier's public fields
// and who created it.
type TokenInfo struct {
	ID          string
	Principal   string
	Description string
	CreatedMs   int64
	// ExpiresMs is when the token stops working; 0: never.
	ExpiresMs int64
	// CreatedBy is the principal that created the token ("User:admin").
	CreatedBy string
}

// SCRAMInfo is what may be shown of a SCRAM credential: never its salt
// or keys.
type SCRAMInfo struct {
	User string
	// Mechanism is "SCRAM-SHA-256" or "SCRAM-SHA-512".
	Mechanism  string
	Iterations int
	// SetBy is the principal that set the credential, SetMs when.
	SetBy string
	SetMs int64
}

// FeatureLevel numbers the command kinds a build understands: a cluster
// proposes a kind only once every member registered a level that covers
// it (docs/architecture.md, "Rolling upgrades").
type FeatureLevel uint32

// RaftStates lists the Raft states Status.State takes, in a fixed order.
func RaftStates() []string { return []string{"Follower", "Candidate", "Leader", "Shutdown"} }

// BackupInfo describes a backup about to be streamed.
type BackupInfo struct {
	Header backupfile.Header
	// Size is the number of bytes the backup file will have.
	Size int64
}

// RaftConnStats counts the connections of a node's Raft port since it
// opened.
type RaftConnStats struct {
	// Open is the number of accepted connections open now, in their
	// handshake or serving Raft.
	Open int
	// Admitted counts Raft connections handed to Raft: streams of
	// sessions, and connections of the previous framing.
	Admitted uint64
	// Sessions is the number of sessions open now, accepted and dialed.
	Sessions int
	// Secret says whether the node holds a cluster secret (SecretHeld)
	// and requires it (SecretRequired), or holds none (SecretNone).
	Secret SecretState
	// RefusedCap counts connections closed at once because MaxRaftConns
	// were open.
	RefusedCap uint64
	// RefusedHandshake counts TLS handshakes that failed or did not
	// finish in time: no certificate, one the cluster CA did not sign or
	// that expired, or not TLS at all.
	RefusedHandshake uint64
	// RefusedNotNode counts verified certificates that are not node
	// certificates (a client's).
	RefusedNotNode uint64
	// RefusedNotMember counts node certificates of nodes outside the
	// latest Raft configuration this node knows (and, for streams of a
	// session, nodes the cluster secret proved).
	RefusedNotMember uint64
	// RefusedSecret counts sessions refused for the cluster secret (the
	// node holds one and the peer proved none, or another) and
	// connections of the previous framing refused because the node
	// holds one.
	RefusedSecret uint64
}

// SecretState is where a node stands with the cluster secret
// (docs/security.md, "Peers").
type SecretState int

const (
	// SecretNone: the node holds no cluster secret (a cluster of an
	// earlier build, or an in-memory node).
	SecretNone SecretState = iota
	// SecretHeld: the node proves the secret but does not require it yet
	// (the cluster is being handed it).
	SecretHeld
	// SecretRequired: the node requires the secret of every peer.
	SecretRequired
)

// SegmentPathPrefix is where a front end mounts the node's segment
// endpoint, which peers catching up from a snapshot fetch segment files
// from (the handler the backend gives for it).
const SegmentPathPrefix = "/internal/v1/segment/"
