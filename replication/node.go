package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	waltypes "github.com/hashicorp/raft-wal/types"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/internal/membudget"
	"github.com/logd-dev/logd/internal/slogbridge"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/peer"
	"github.com/logd-dev/logd/replication/catchup"
	"github.com/logd-dev/logd/replication/cleaner"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/observe"
	"github.com/logd-dev/logd/replication/raftstore"
	"github.com/logd-dev/logd/replication/redrive"
)

// Config configures a Node. The zero value of each optional field has the
// documented default.
type Config struct {
	// NodeID is this node's Raft server ID. Required.
	NodeID string
	// DataDir holds raft/ (log, stable store, snapshots) and topics/.
	// Required.
	DataDir string
	// RaftBind is the TCP address Raft listens on. Required, except with
	// InMemory, where it names the in-memory transport's address (empty: a
	// generated one).
	RaftBind string
	// RaftAdvertise is the address peers use to reach this node; default
	// RaftBind.
	RaftAdvertise string
	// Bootstrap makes a node with no existing Raft state bootstrap a
	// single-node cluster of itself.
	Bootstrap bool
	// Log holds partition log options; its Sync field is ignored (see
	// SyncPartitions).
	Log log.Options
	// SyncPartitions also fsyncs partition logs on every append. By default
	// they are not: the Raft log (fsynced before every commit) is the
	// write-ahead log, partition data is fsynced before every snapshot, so
	// the Raft log is never compacted past data that is not durable, and a
	// torn partition tail is replayed from the Raft log after a crash.
	SyncPartitions bool
	// SnapshotInterval and SnapshotThreshold: how often Raft checks, and how
	// many new entries trigger a snapshot; defaults 30s and 8192.
	SnapshotInterval  time.Duration
	SnapshotThreshold uint64
	// SnapshotBytes triggers a snapshot once this many bytes of appends
	// were applied since the last one, so the Raft log (a write-ahead log
	// of record batches) stays bounded in bytes, not only in entries;
	// default 128 MiB. The trigger rises to windowSnapshotRatio times the
	// size of the idempotency windows the last snapshot wrote, when that
	// is more (snapshotDue).
	SnapshotBytes int64
	// PartitionSyncBytes: a background goroutine fsyncs a partition log
	// once this many bytes were appended to it since its last sync, so a
	// snapshot finds little left to sync and its fsyncs do not hold up the
	// Raft log's (fsm.FSM.SyncDirty); default DefaultPartitionSyncBytes,
	// negative: partition logs are synced only at snapshots. Ignored with
	// SyncPartitions.
	PartitionSyncBytes int64
	// TrailingLogs is how many entries stay after a snapshot, for followers
	// that lag a little; default 512.
	TrailingLogs uint64
	// TrailingBytes bounds those entries in bytes as well: when the
	// entries since the last snapshot average more than TrailingBytes /
	// TrailingLogs, fewer stay (at least raftstore.MinTrailingLogs);
	// default raftstore.DefaultTrailingBytes, negative: entries only
	// (raftstore.TrailingBound).
	TrailingBytes int64
	// BatchApplyCh buffers Raft's apply channel to MaxAppendEntries, so more
	// concurrent proposals are waiting when the leader takes a group of
	// them into one log write (see BenchmarkGroupCommit).
	BatchApplyCh bool
	// ApplyTimeout bounds how long a proposal waits to be enqueued; default 5s.
	ApplyTimeout time.Duration
	// RecentLogBytes bounds the memory of the newest Raft entries kept to
	// answer Raft's reads of its own log (raftstore.CacheRecent): a leader
	// sending entries to followers, a follower applying them. Default
	// raftstore.DefaultRecentLogBytes; negative keeps none.
	RecentLogBytes int
	// Logger receives structured logs; default slog.Default().
	Logger *slog.Logger
	// RaftLogLevel is hashicorp/raft's own log level; default "warn".
	RaftLogLevel string
	// Fatal is called when the state machine hits an error it must not
	// continue past (an I/O error inside Apply). Default: log and exit the
	// process with status 70, so nothing more is acknowledged.
	Fatal func(error)
	// Now stamps commands on the leader; default time.Now.
	Now func() time.Time
	// CleanerInterval is how often the leader plans retention and
	// compaction (package replication/cleaner); default
	// cleaner.DefaultInterval.
	CleanerInterval time.Duration
	// CleanerIOBytesPerSec bounds the I/O (reads plus writes, bytes per
	// second) of the leader's compaction preparation; 0 is
	// cleaner.DefaultIOBytesPerSec, negative unbounded.
	CleanerIOBytesPerSec int64
	// APIAdvertise is the client API address (host:port) other nodes and
	// clients use to reach this node; the leader registers it in the
	// replicated node registry (cluster.go). Empty: not registered.
	APIAdvertise string
	// PeerAdvertise, if set, is where other nodes call this one for
	// node-to-node HTTP (forwarded writes, segment catch-up, the leader's
	// questions to a joining node), a listener of its own beside the
	// client API (cmd/logd's --peer-listen); it is registered with the
	// API address, and peers call the API address of a node that
	// registered none. KafkaAdvertise, if set, is the Kafka address
	// registered with it (package kafka's Metadata).
	PeerAdvertise, KafkaAdvertise string
	// SegmentSource fetches segment bytes from peers when a snapshot names
	// data this node lacks (package replication/catchup); nil: such a
	// snapshot is refused. A *catchup.SegmentClient without Sign is given
	// one that proves the cluster secret to peers without peer TLS
	// (secret.go).
	SegmentSource catchup.SegmentSource
	// CatchUpTimeout bounds one snapshot catch-up, not counting its waits
	// for MoveBytesPerSecond; default catchup.DefaultCatchUpTimeout.
	CatchUpTimeout time.Duration
	// MoveBytesPerSecond bounds the segment bytes per second this node
	// reads from peers to build or catch up its replicas, in the meta
	// group and every data group together (one budget per node:
	// catchup.Throttle); 0 is catchup.DefaultMoveBytesPerSecond,
	// negative unbounded. Raft's own traffic, client reads and backups
	// are not paced by it.
	MoveBytesPerSecond int64
	// Peers, if set, routes Raft's dials to peers (package peer); Open
	// attaches the node registry to it, so the front end's dials to a
	// peer's registered API address can be routed too. Nil: peers are
	// dialed at their advertised addresses.
	Peers *peer.Resolver
	// PeerTLS, if set, puts node-to-node traffic under mutual TLS with the
	// cluster CA (package peer): the Raft port, which admits only node
	// certificates of members; the segment endpoint, which answers only
	// node certificates; and Join, which adds only a node that proved its
	// identity. Nil: plaintext, as a loopback cluster runs. Dials over
	// HTTP take PeerTLS.Client through peer.HTTP.
	PeerTLS *peer.TLS
	// MaxRaftConns bounds the connections open on the Raft port, with or
	// without TLS; more are closed at once (package replication/transport).
	// Zero is DefaultMaxRaftConns.
	MaxRaftConns int
	// InMemory keeps Raft's log, stable store and snapshots in memory and
	// connects Raft through raft.NewInmemTransport instead of TCP, so a
	// node runs inside a test process with no Raft port or files (package
	// logdtest). Nothing Raft holds survives Close, so it suits a
	// Bootstrap node used once; DataDir still holds the partition logs.
	InMemory bool
	// Quota bounds the cluster's topics and partitions. The node that
	// proposes a creation (the leader; writes reaching a follower are
	// forwarded to it) writes its quota into the command, and every
	// replica checks it when applying, so all agree; give every node the
	// same quota. While some member's build predates quotas
	// (fsm.QuotaLevel), only the proposer checks, before proposing:
	// concurrent creations may then pass the quota by a few. Its
	// per-principal bounds count the topics each principal created
	// (topic_quota.go). Zero: none.
	Quota backend.TopicQuota
	// HeartbeatTimeout, ElectionTimeout and LeaderLeaseTimeout are
	// hashicorp/raft's timeouts, which decide how fast a failover is and
	// how much stalling a cluster under load tolerates (raft_stores.go).
	// Zero HeartbeatTimeout is DefaultHeartbeatTimeout; zero
	// ElectionTimeout and LeaderLeaseTimeout are the heartbeat timeout.
	// The lease must not exceed the heartbeat timeout, nor that the
	// election timeout. Tests shorten them so a single node elects itself
	// in milliseconds.
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout time.Duration
	// FeatureLevel is the feature level this node registers and counts
	// itself at (features.go); zero is its build's, fsm.Level, and it may
	// not be higher. A lower one makes the node act as a build of that
	// level in a rolling upgrade (it proposes nothing the level does not
	// cover), which is how tests play an older build.
	FeatureLevel backend.FeatureLevel
	// Register, if set, is how this node asks the leader to register its
	// addresses and feature level while it follows (register.go): the Join
	// call over the client API (cmd/logd's joinVia), to the leader's
	// call address, with backend.JoinRequest.RegisterOnly set. Nil: a follower's
	// registration changes only through JoinCluster; a leader registers
	// itself either way.
	Register AskJoin
	// AskSecret, if set, is how a joining node that holds no cluster
	// secret asks for it before it joins (secret.go): the Join call with
	// backend.JoinRequest.SecretOnly set (cmd/logd's secretVia). Nil: a
	// joining node goes without one unless ClusterSecret gives it.
	AskSecret AskSecret
	// ClusterSecret, if set, is the cluster secret (secret.go) of a data
	// dir that holds none yet, which the node stores; one that holds
	// another is an error (ErrClusterSecret). Nil: the data dir's, made
	// at bootstrap or asked for at join.
	ClusterSecret []byte
	// WrapRaftStores, if set, wraps Raft's log and stable store once they
	// are open, the meta group's and each data group's replica's (called
	// once per group): fault builds of cmd/logd slow them down or hold log
	// writes back (internal/faults); tests hand a restarted InMemory node
	// the log it had. A wrapper that is an io.Closer is closed before the
	// store.
	WrapRaftStores func(raft.LogStore, raft.StableStore) (raft.LogStore, raft.StableStore)
	// RaftLogStore is where Raft's log is kept on disk:
	// raftstore.LogStoreBoltDB or raftstore.LogStoreWAL. Empty: the store
	// the data dir's Raft log is in, else raftstore.DefaultLogStore. A
	// data dir whose log is in the other store is refused
	// (raftstore.ErrLogStoreMismatch). Ignored InMemory.
	RaftLogStore string
	// WALSegmentBytes is the size of one raft-wal segment file; 0:
	// raftstore.DefaultWALSegmentBytes. Raft's log is cut after a
	// snapshot by whole sealed segments only (docs/operations.md, "Raft
	// log store").
	WALSegmentBytes int
	// DataGroupsPerNode is how many data groups each member adds to the
	// cluster: it starts with that many, and each node that joins adds
	// as many (data_groups.go). 0: none, every partition in the meta
	// group, as before data groups. At most MaxDataGroupsPerNode; not
	// with InMemory. A cluster that has data groups keeps them whatever
	// its meta leader's value: with 0 it adds no more, and still places
	// joining nodes, drains, heals and balances the groups it has.
	DataGroupsPerNode int
	// DataGroupsPerNodeIsDefault says DataGroupsPerNode is a default,
	// not the operator's choice (logd's --data-groups-per-node unset):
	// a cluster whose meta group holds topics and that has no data
	// groups (one from before data groups, or run without them) then
	// starts none, so an upgrade to a build whose default starts data
	// groups leaves such a cluster as it was (dataGroupsPerNode;
	// docs/operations.md, "Data groups").
	DataGroupsPerNodeIsDefault bool
	// ReplicationFactor is how many replicas a data group gets, fewer
	// while the cluster has fewer nodes; 0: DefaultReplicationFactor.
	ReplicationFactor int
	// DeadNodeTimeout is how long the meta leader goes without hearing a
	// member before it gives the member's data group replicas to other
	// nodes (data_groups.go, deadNodes); 0: never.
	DeadNodeTimeout time.Duration
	// retireAfter is how long a replica the table no longer lists runs
	// before it may be retired (retire.go); 0: retireAfter. Tests
	// shorten it.
	retireAfter time.Duration
	// wrapGroupLog, if set, wraps the Raft log of this node's replica of
	// each data group it opens (given the group's id): tests hold a
	// replica's log writes back.
	wrapGroupLog func(group uint64, logs raft.LogStore) raft.LogStore
	// MaxMoves caps the replica moves balancing keeps in flight at once
	// (data_groups.go, balance); 0: DefaultMaxMoves; negative: balancing
	// off (replicas still move to joiners, away from drained, removed and
	// dead nodes).
	MaxMoves int
	// WrapRaftWALFS, if set, wraps the file system raft-wal writes its
	// segment files through: fault builds of cmd/logd model a power cut
	// there (internal/faults).
	WrapRaftWALFS func(waltypes.VFS) waltypes.VFS
}

// Validate checks required fields, the Raft stores' options
// (raftstore.Options.Validate) and the Raft timeouts.
func (c Config) Validate() error {
	storeErr := c.storeOptions(nil).Validate()
	switch {
	case c.NodeID == "":
		return fmt.Errorf("%w: node id is required", backend.ErrInvalidArgument)
	case c.DataDir == "":
		return fmt.Errorf("%w: data dir is required", backend.ErrInvalidArgument)
	case c.RaftBind == "" && !c.InMemory:
		return fmt.Errorf("%w: raft bind address is required", backend.ErrInvalidArgument)
	case c.FeatureLevel > backend.FeatureLevel(fsm.Level):
		return fmt.Errorf("%w: feature level %d is above this build's %d", backend.ErrInvalidArgument, c.FeatureLevel, fsm.Level)
	case storeErr != nil:
		return fmt.Errorf("%w: %w", backend.ErrInvalidArgument, storeErr)
	case c.DataGroupsPerNode < 0 || c.DataGroupsPerNode > MaxDataGroupsPerNode:
		return fmt.Errorf("%w: %d data groups per node, want 0 to %d", backend.ErrInvalidArgument, c.DataGroupsPerNode, MaxDataGroupsPerNode)
	case c.DataGroupsPerNode > 0 && c.InMemory:
		return fmt.Errorf("%w: data groups need Raft over TCP, not in memory", backend.ErrInvalidArgument)
	case c.ReplicationFactor < 0:
		return fmt.Errorf("%w: replication factor %d is negative", backend.ErrInvalidArgument, c.ReplicationFactor)
	case c.MaxRaftConns < 0:
		return fmt.Errorf("%w: max raft connections %d is negative", backend.ErrInvalidArgument, c.MaxRaftConns)
	case c.PeerTLS != nil && c.InMemory:
		return fmt.Errorf("%w: peer TLS needs Raft over TCP, not in memory", backend.ErrInvalidArgument)
	case c.PeerTLS != nil:
		if err := c.PeerTLS.Validate(); err != nil {
			return fmt.Errorf("%w: %w", backend.ErrInvalidArgument, err)
		}
	}
	return c.validateRaftTimeouts()
}

// DefaultMaxRaftConns is Config.MaxRaftConns's default.
const DefaultMaxRaftConns = 256

func (c *Config) setDefaults() {
	if c.RaftAdvertise == "" {
		c.RaftAdvertise = c.RaftBind
	}
	if c.MaxRaftConns == 0 {
		c.MaxRaftConns = DefaultMaxRaftConns
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = DefaultReplicationFactor
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = 30 * time.Second
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 8192
	}
	if c.SnapshotBytes == 0 {
		c.SnapshotBytes = 128 << 20
	}
	if c.PartitionSyncBytes == 0 {
		c.PartitionSyncBytes = DefaultPartitionSyncBytes
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = 512
	}
	if c.TrailingBytes == 0 {
		c.TrailingBytes = raftstore.DefaultTrailingBytes
	}
	if c.ApplyTimeout == 0 {
		c.ApplyTimeout = 5 * time.Second
	}
	if c.RecentLogBytes == 0 {
		c.RecentLogBytes = raftstore.DefaultRecentLogBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RaftLogLevel == "" {
		c.RaftLogLevel = "warn"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.FeatureLevel == 0 {
		c.FeatureLevel = backend.FeatureLevel(fsm.Level)
	}
	if c.Fatal == nil {
		logger := c.Logger
		c.Fatal = func(err error) {
			logger.Error("stopping the node: state machine failure", "err", err)
			os.Exit(70)
		}
	}
}

// Node is one member of the Raft group: the Raft instance, its stores and
// the FSM.
type Node struct {
	cfg Config
	// leaderCalls are the handlers of calls to the meta leader, by
	// service (leader_calls.go).
	leaderCalls sync.Map
	// queueTurn turns the data group a claim on a placed topic asks
	// first (queue_route.go).
	queueTurn atomic.Uint64
	// floors keep reads of placed partitions from going back
	// (read_floor.go).
	floors readFloors
	// order keeps an idempotent producer's batches of a partition in
	// its order on their way into Raft (produce_order.go).
	order produceOrder
	// groupFloors keep reads of data groups from missing a write this
	// node saw acknowledged (read_floor.go).
	groupFloors groupFloors
	// startIndex is the meta group's last index when this process opened
	// it: a topic created at a later index is one no earlier process of
	// this node read (read_floor.go).
	startIndex uint64
	// sizes caches data groups' sizes for balancing (group_sizes.go).
	sizes groupSizes
	// answers is the node's answer memory budget (SetAnswerBudget), which
	// reads served to other nodes are charged to (remote_answers.go).
	answers atomic.Pointer[membudget.Budget]
	// secretMu orders writes of the cluster secret (secret.go), which the
	// Raft port holds.
	secretMu sync.Mutex
	// stop is closed when Close begins; it also ends snapshot installs in
	// progress, in every group (catchup.FetcherOptions.Stop).
	stop chan struct{}
	done chan struct{}
	// moves is the budget of the segment bytes every group's snapshot
	// catch-up reads from peers (Config.MoveBytesPerSecond).
	moves *catchup.Throttle
	// ready is set once this node's state machine has applied everything
	// committed before it started serving (see Ready).
	ready atomic.Bool
	// leaderTerm is the Raft term in which this node, as leader, applied a
	// barrier: everything committed in earlier terms is in its state
	// machine. A new leader may hold entries that its predecessor
	// acknowledged but that it has not applied yet; until the barrier of
	// its own term it must not answer from its state (see Ready).
	leaderTerm atomic.Uint64
	// applyWaiters counts propose's goroutines still waiting on a Raft
	// future whose caller may have given up; Close lets them end before
	// stopping Raft, which never answers a future it has not applied
	// when it shuts down.
	applyWaiters atomic.Int64
	// appends coalesces the meta group's appends (coalesce.go).
	appends coalescer
	raft    *raft.Raft
	fsm     *fsm.FSM
	stores  *raftStores
	// applied wakes waiters after each applied batch (adapter.go).
	applied *appliedSignal
	// leaderCommits is the leader's commit index as this node heard it
	// (package replication/observe); forwardStop ends the transport wrapper's
	// forward once Raft has shut down, forwardDone is closed when it
	// has ended.
	leaderCommits *observe.LeaderCommits
	forwardStop   chan struct{}
	forwardDone   chan struct{}

	// cleanerDone is closed when the cleaner's loop (jobs.go) ends,
	// registerDone when the self-registration goroutine (register.go)
	// does, syncerDone when syncPartitions does.
	cleanerDone  chan struct{}
	registerDone chan struct{}
	syncerDone   chan struct{}
	cleaner      *cleaner.Cleaner
	// redrive runs the leader's redrive jobs (jobs.go); redriveDone is
	// closed when its loop ends.
	redrive     *redrive.Runner
	redriveDone chan struct{}
	// cluster serializes membership changes (cluster.go).
	cluster clusterState
	// observer gathers Raft's measurements (package replication/observe); leaderObs
	// receives Raft's leader observations, which housekeeping counts,
	// through leaderObsv.
	observer   *observe.Metrics
	leaderObs  chan raft.Observation
	leaderObsv *raft.Observer
	// data runs this node's replicas of data groups (data_groups.go).
	data *dataGroups
	// homes are consumer groups' homes learnt from the meta leader
	// (groups_route.go).
	homes groupHomes
	// external returns a group as a coordinator outside the state
	// machine holds it (SetExternalGroupMembers); nil: none.
	external atomic.Pointer[func(group string) backend.ExternalGroup]
	// cuts are the cuts of data groups this node holds for backups
	// another node writes (backup_cuts.go).
	cuts heldCuts
}

// Open starts a node: it opens the stores, restores the latest snapshot,
// replays the Raft log and, with Bootstrap and no prior state, bootstraps a
// single-node cluster. Close stops everything Open started.
func Open(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	// Raft's lines go to the node's handler, in its format
	// (internal/slogbridge).
	hlog := slogbridge.HCLog(cfg.Logger.Handler(), "raft", hclog.LevelFromString(cfg.RaftLogLevel))
	open := openDiskStores
	if cfg.InMemory {
		open = openMemStores
	}
	stores, err := open(cfg, hlog)
	if err != nil {
		return nil, err
	}

	rc := raftConfig(cfg, hlog)

	logOpts := cfg.Log
	logOpts.Sync = log.SyncNone
	if cfg.SyncPartitions {
		logOpts.Sync = log.SyncEveryAppend
	}
	if sc, ok := cfg.SegmentSource.(*catchup.SegmentClient); ok {
		signPeerCalls(sc, stores.port, cfg)
	}
	// The meta group's partitions (every partition, without data groups)
	// are copied under the same budget as the data groups': a node that
	// joins copies them to build its replica as a moved data group
	// replica does (docs/operations.md, "Moving replicas").
	stop, moves := make(chan struct{}), catchup.NewThrottle(moveBytesPerSecond(cfg.MoveBytesPerSecond))
	sm := fsm.New(fsm.Config{
		Dir: filepath.Join(cfg.DataDir, "topics"), Log: logOpts, Logger: cfg.Logger, Fatal: cfg.Fatal,
		Self: cfg.NodeID, Fetcher: catchup.NewSegmentFetcher(cfg.SegmentSource, catchup.FetcherOptions{
			Timeout: cfg.CatchUpTimeout, Logger: cfg.Logger, Throttle: moves, Stop: stop}),
	})

	cfg.Peers.Attach(registeredAt(sm))

	if cfg.Bootstrap {
		has, err := raft.HasExistingState(stores.logs, stores.stable, stores.snaps)
		if err != nil {
			stores.close()
			return nil, fmt.Errorf("check raft state: %w", err)
		}
		if !has {
			conf := raft.Configuration{Servers: []raft.Server{{ID: rc.LocalID, Address: stores.transport.LocalAddr()}}}
			if err := raft.BootstrapCluster(rc, stores.logs, stores.stable, stores.snaps, stores.transport, conf); err != nil {
				stores.close()
				return nil, fmt.Errorf("bootstrap: %w", err)
			}
			cfg.Logger.Info("bootstrapped a single-node cluster", "node", cfg.NodeID)
		}
	}
	applied := new(appliedSignal)
	// Raft runs on wrappers that measure it (package replication/observe); stores
	// keeps the stores and transport themselves.
	obs := observe.NewMetrics()
	logs := raftstore.CacheRecent(observe.TimeLogStore(stores.logs, &obs.StoreLogs), cfg.RecentLogBytes)
	commits := new(observe.LeaderCommits)
	forwardStop := make(chan struct{})
	trans, observed := stores.observeTransport(obs, commits, forwardStop)
	r, err := raft.NewRaft(rc, &raftFSM{f: sm, applied: applied, obs: obs, logger: cfg.Logger}, logs, stores.stable, stores.snaps, trans)
	if err != nil {
		close(forwardStop)
		stores.close()
		sm.Close()
		return nil, fmt.Errorf("start raft: %w", err)
	}
	n := &Node{cfg: cfg, raft: r, fsm: sm, stores: stores, applied: applied, stop: stop, moves: moves, done: make(chan struct{}),
		observer: obs, leaderObs: make(chan raft.Observation, 16),
		leaderCommits: commits, forwardStop: forwardStop, forwardDone: make(chan struct{}),
		startIndex: r.LastIndex()}
	n.data = newDataGroups(n)
	observed.SetTerm(r.CurrentTerm)
	// Raft receives nothing until forward runs.
	go func() {
		defer close(n.forwardDone)
		observed.Forward(n.forwardStop)
	}()
	// Leader changes reach housekeeping; an observation that finds the
	// channel full is dropped rather than stall Raft.
	n.leaderObsv = raft.NewObserver(n.leaderObs, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	r.RegisterObserver(n.leaderObsv)
	if stores.port != nil {
		stores.port.HandleCalls(n.answerCall)
		stores.layer.Attach(n.raftMember)
		if err := n.ensureSecret(); err != nil {
			n.cfg.Logger.Error("make the cluster secret", "err", err)
		}
	}
	go n.housekeeping()
	n.startJobs()
	n.registerDone = make(chan struct{})
	go n.runRegistration()
	n.syncerDone = make(chan struct{})
	go n.syncPartitions()
	n.startDataGroups()
	return n, nil
}

// DefaultPartitionSyncBytes is Config.PartitionSyncBytes's default: at
// hundreds of MB/s an fsync of 4 MiB takes about 10 ms, short beside the
// Raft log's own fsyncs it may delay.
const DefaultPartitionSyncBytes = 4 << 20

// partitionSyncInterval is how often syncPartitions looks for partition
// logs with PartitionSyncBytes unsynced.
const partitionSyncInterval = 50 * time.Millisecond

// syncPartitions fsyncs partition logs with PartitionSyncBytes appended
// since their last sync, off the FSM goroutine (fsm.FSM.SyncDirty), until
// Close. A failed fsync leaves that log refusing appends, so the next
// apply to it stops the node; here it is logged, and the syncing ends
// (snapshots still sync, and fail on that log).
func (n *Node) syncPartitions() {
	defer close(n.syncerDone)
	if n.cfg.SyncPartitions || n.cfg.PartitionSyncBytes < 0 {
		return
	}
	t := time.NewTicker(partitionSyncInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		// The data groups' partitions too (data_groups.go).
		for _, f := range n.stateMachines() {
			if err := f.SyncDirty(n.cfg.PartitionSyncBytes); err != nil {
				n.cfg.Logger.Error("background partition sync failed; the next append to that partition stops the node", "err", err)
				return
			}
		}
	}
}

// housekeeping marks the node ready once it has caught up, and asks for a
// snapshot whenever SnapshotBytes of appends were applied since the last
// one. It ends when Close closes n.stop.
func (n *Node) housekeeping() {
	defer close(n.done)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	var lastRenewal time.Time // renewStaleSnapshot's
	var lastPrune time.Time
	for {
		select {
		case <-n.stop:
			return
		case o := <-n.leaderObs:
			if lo, ok := o.Data.(raft.LeaderObservation); ok {
				n.observer.LeaderObserved(lo.LeaderID, raft.ServerID(n.cfg.NodeID))
			}
			continue
		case leads := <-n.raft.LeaderCh():
			// Leadership changed: a new leader runs its barrier at once
			// rather than at the next tick, since it serves nothing
			// until then. The log lines time a failover's phases
			// (cmd/logd TestClusterFailoverTime reads them).
			if leads {
				n.cfg.Logger.Info("won the election; applying a barrier before serving", "term", n.raft.CurrentTerm())
			} else {
				n.cfg.Logger.Info("lost the leadership", "term", n.raft.CurrentTerm())
			}
		case <-t.C:
		}
		if !n.ready.Load() && n.caughtUp() {
			n.ready.Store(true)
			n.cfg.Logger.Info("state machine caught up; serving", "applied_index", n.fsm.AppliedIndex())
		}
		n.leaderBarrier()
		n.boundTrailingLogs()
		if n.stores.port != nil && time.Since(lastPrune) >= raftPruneInterval {
			lastPrune = time.Now()
			n.stores.port.Prune()
		}
		snapshotHousekeeping(n.raft, n.fsm, n.cfg.snapshotSettings(), n.cfg.Logger, &lastRenewal)
	}
}

// snapshotSettings are the settings of Config that a group's
// housekeeping reads (snapshotHousekeeping, boundTrailingLogs), copied
// once: the rest of Config is not the housekeeping's to read.
type snapshotSettings struct {
	bytes         int64
	interval      time.Duration
	trailingLogs  uint64
	trailingBytes int64
}

// snapshotSettings returns c's snapshotSettings.
func (c *Config) snapshotSettings() snapshotSettings {
	return snapshotSettings{bytes: c.SnapshotBytes, interval: c.SnapshotInterval, trailingLogs: c.TrailingLogs, trailingBytes: c.TrailingBytes}
}

// snapshotHousekeeping asks Raft r, over state machine f, for the
// snapshots Raft's own trigger (SnapshotThreshold entries) does not take:
// after a leader's latest snapshot went stale (renewStaleSnapshot), and
// by size, whenever SnapshotBytes of appends were applied since the last
// one (snapshotDue). Without the second a group of large entries keeps
// up to SnapshotThreshold of them in its Raft log, gigabytes, all
// replayed at a restart. The meta group and each data group replica run
// it on their housekeeping goroutines; *lastRenewal is
// renewStaleSnapshot's.
func snapshotHousekeeping(r *raft.Raft, f *fsm.FSM, cfg snapshotSettings, logger *slog.Logger, lastRenewal *time.Time) {
	if renewStaleSnapshot(r, f, cfg, logger, lastRenewal) {
		return
	}
	if !snapshotDue(f.BytesSinceSnapshot(), cfg.bytes, f.WindowBytes()) {
		return
	}
	if err := r.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		logger.Warn("snapshot by size", "err", err)
	}
}

// renewStaleSnapshot takes a snapshot when r leads its group and its
// latest snapshot lists segments that applied compactions, trims or topic
// deletions have since replaced or deleted, at most once per
// SnapshotInterval (*last is when it last did). Raft sends a follower that
// is behind its trailing logs the latest snapshot, and the follower
// fetches the listed segment bytes from peers (package catchup); without
// this, a cluster that stopped writing would keep a snapshot whose
// segments no peer serves, and such a follower would never converge. It
// reports whether it took one.
func renewStaleSnapshot(r *raft.Raft, f *fsm.FSM, cfg snapshotSettings, logger *slog.Logger, last *time.Time) bool {
	if r.State() != raft.Leader || !f.SegmentsChangedSinceSnapshot() || time.Since(*last) < cfg.interval {
		return false
	}
	*last = time.Now()
	err := r.Snapshot().Error()
	if err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		logger.Warn("snapshot after segments changed", "err", err)
		return false
	}
	logger.Debug("snapshot after segments changed", "applied_index", f.AppliedIndex(), "err", err)
	return err == nil
}

// leaderBarrier runs a barrier when this node leads a term it has not run
// one in, and records the term once the barrier is applied.
func (n *Node) leaderBarrier() {
	if n.raft.State() != raft.Leader {
		return
	}
	term := n.raft.CurrentTerm()
	if n.leaderTerm.Load() == term {
		return
	}
	start := time.Now()
	if err := n.raft.Barrier(time.Second).Error(); err != nil {
		return // lost the leadership, or slow: the next round retries
	}
	// A term that moved on during the barrier stays unrecorded; the next
	// round runs the barrier of the new term.
	if n.raft.CurrentTerm() == term {
		n.leaderTerm.Store(term)
		n.cfg.Logger.Info("leader barrier applied; serving as leader", "term", term, "barrier", time.Since(start))
	}
}

// windowSnapshotRatio: a snapshot by size waits for this many times the
// bytes of idempotency windows the last snapshot wrote. Every snapshot
// writes every topic's window whole (about 50 bytes per key held), so
// with large windows, snapshots every SnapshotBytes would write as much
// window as record data: 2M keys held are ~100 MB per snapshot, against
// 128 MiB of appends. With the ratio, windows add at most a quarter to
// the bytes a node writes; the price is a Raft log of up to 4 times the
// windows' size (replayed after a restart). At the default
// idempotency.max.keys (100k, ~5 MB) SnapshotBytes rules.
const windowSnapshotRatio = 4

// snapshotDue reports whether appends of since bytes call for a snapshot
// by size, given the SnapshotBytes setting and the size of the windows in
// the last snapshot.
func snapshotDue(since, snapshotBytes, windowBytes int64) bool {
	return since >= max(snapshotBytes, windowSnapshotRatio*windowBytes)
}

// Ready reports whether the node's state can be served. A restarted node
// replays its Raft log first, and a node added with fresh data receives
// the leader's log or snapshot; until it has applied every entry
// committed before it started it would answer from an old state (a topic
// created before the restart would look unknown, an end offset it, or
// the node of its id before, served would go back; see caughtUp). A leader, after every
// election, must first apply a barrier of its own term: it may hold
// entries its predecessor acknowledged that it has not applied yet, and
// answering before would show an acknowledged commit undone. Followers
// serve what they have applied, which may trail the leader but never goes
// back.
//
// After a start it also waits until the data group replicas the node held
// have caught up with their groups, for at most startGroupsWait
// (dataGroups.noteStartServing): a single node is every group's only
// replica, and nothing else could answer for them.
func (n *Node) Ready() bool {
	return n.metaReady() && n.data.startServing.Load()
}

// metaReady is Ready for the meta group alone: what the node's own work on
// the meta group's state (placing data groups, its jobs, backups, read
// indexes) waits for.
func (n *Node) metaReady() bool {
	if !n.ready.Load() {
		return false
	}
	return n.raft.State() != raft.Leader || n.leaderTerm.Load() == n.raft.CurrentTerm()
}

// caughtUp: a leader has applied its barrier (every earlier entry); a
// follower has applied the commit index the first AppendEntries of the
// current term it received carried, and its own commit index, once that
// covers an entry of the leader's term.
//
// The first condition waits for the leader's commit index as of a moment
// after this node started: its own commit index is the leader's cut to
// the last entry it holds, and while it replays a long log in batches it
// would pass the second after each batch (observe.LeaderCommits).
//
// A new leader learns the commit index only when an entry of its own term
// commits; until then it sends the one it knew in the old term, which may
// be below what the old leader applied. A restarted node (the old leader
// itself, killed and back at once, its partition logs cut to what was
// synced) that became ready at such a commit index would answer from an
// older state than before its restart: its end offsets would go back
// (docs/faults.md, the nemesis harness's follower reads). A commit index
// whose entry is of the current term was set by that term's leader after
// it committed its own first entry, so it covers every entry committed in
// earlier terms, and everything this leader committed before this node
// restarted.
func (n *Node) caughtUp() bool {
	switch n.raft.State() {
	case raft.Leader:
		n.leaderBarrier()
		return n.leaderTerm.Load() == n.raft.CurrentTerm()
	case raft.Follower:
		if addr, _ := n.raft.LeaderWithID(); addr == "" {
			return false
		}
		term := n.raft.CurrentTerm()
		if heard, ok := n.leaderCommits.In(term); !ok || !n.appliedThrough(heard) {
			return false
		}
		stats := n.raft.Stats()
		commit, err := strconv.ParseUint(stats["commit_index"], 10, 64)
		if err != nil || commit == 0 || !n.appliedThrough(commit) {
			return false
		}
		return entryTerm(n.raft, n.stores.logs, commit) == term
	}
	return false
}

// entryTerm is the term of the Raft entry at index of r, from its log
// logs or, once compacted, from r's latest snapshot if it ends there; 0
// if unknown.
func entryTerm(r *raft.Raft, logs raft.LogStore, index uint64) uint64 {
	var l raft.Log
	if err := logs.GetLog(index, &l); err == nil {
		return l.Term
	}
	stats := r.Stats()
	snapIndex, err1 := strconv.ParseUint(stats["last_snapshot_index"], 10, 64)
	snapTerm, err2 := strconv.ParseUint(stats["last_snapshot_term"], 10, 64)
	if err1 != nil || err2 != nil || snapIndex != index {
		return 0
	}
	return snapTerm
}

// raftPruneInterval is how often the node closes the Raft connections of
// nodes no longer members (transport.Port.Prune).
const raftPruneInterval = time.Second

// raftMember reports whether node id may open Raft connections to this
// node: it is in the latest Raft configuration this node knows, as a
// voter or not, or this node knows none yet (a fresh node waiting for its
// leader's first contact, which cannot tell its leader from any other
// node of the cluster CA).
func (n *Node) raftMember(id string) bool {
	servers := n.raft.GetConfiguration().Configuration().Servers
	if len(servers) == 0 {
		return true
	}
	for _, s := range servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}

// RaftConnStats returns the counters of this node's Raft port; zero for
// an InMemory node.
func (n *Node) RaftConnStats() backend.RaftConnStats {
	if n.stores.port == nil {
		return backend.RaftConnStats{}
	}
	return n.stores.port.Stats()
}

// FSM returns the node's state machine for reads.
func (n *Node) FSM() *fsm.FSM { return n.fsm }

// Raft exposes the underlying Raft instance for status and membership.
func (n *Node) Raft() *raft.Raft { return n.raft }

// IsLeader reports whether this node is the Raft leader.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// WaitLeader waits until some node is leader (this one or another) or ctx
// ends.
func (n *Node) WaitLeader(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if addr, _ := n.raft.LeaderWithID(); addr != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for a leader: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// propose submits an encoded command and waits until it is committed and
// applied, returning the FSM's result; it seals data (fsm.Seal). A command
// the cluster's feature level does not cover is refused (features.go). If
// ctx ends first the outcome is unknown: backend.ErrTimeout.
func (n *Node) propose(ctx context.Context, data []byte) (any, error) {
	return n.proposeOn(ctx, n.raft, n.fsm, data)
}

// proposeOn is propose into the Raft group r runs, whose state machine
// is f: the meta group's, or a data group's (data_groups.go).
func (n *Node) proposeOn(ctx context.Context, r *raft.Raft, sm *fsm.FSM, data []byte) (any, error) {
	if err := n.mayPropose(r, sm, data); err != nil {
		return nil, err
	}
	timeout := n.cfg.ApplyTimeout
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = time.Until(d)
	}
	f := r.Apply(fsm.Seal(data), timeout)
	done := make(chan error, 1)
	n.applyWaiters.Add(1)
	go func() {
		defer n.applyWaiters.Add(-1)
		done <- f.Error()
	}()
	select {
	case err := <-done:
		if err != nil {
			return nil, mapRaftError(err)
		}
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %v", backend.ErrTimeout, ctx.Err())
	}
	if err, ok := f.Response().(error); ok {
		return nil, err
	}
	return f.Response(), nil
}

// mayPropose refuses a proposal of data to the group r runs (whose state
// machine is sm) before it is made: the state machine stopped, this node
// does not lead, or the cluster's feature level does not cover data.
func (n *Node) mayPropose(r *raft.Raft, sm *fsm.FSM, data []byte) error {
	if err := sm.Failed(); err != nil {
		return fmt.Errorf("%w: %v", backend.ErrStopped, err)
	}
	if r.State() != raft.Leader {
		return backend.ErrNotLeader
	}
	return n.checkFeatureLevel(data)
}

func mapRaftError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return backend.ErrNotLeader
	case errors.Is(err, raft.ErrLeadershipTransferInProgress):
		// Refused before it was logged: a leader hands over.
		return fmt.Errorf("%w: %v", backend.ErrNotLeader, err)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		// Never enqueued: definitely not applied.
		return fmt.Errorf("%w: %v", backend.ErrNotLeader, err)
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("%w: %v", backend.ErrTimeout, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return backend.ErrShutdown
	}
	return err
}

// createTopic proposes a topic creation and returns the created topic.
func (b *Backend) createTopic(ctx context.Context, c fsm.CreateTopic) (*fsm.Topic, error) {
	if err := fsm.ValidateCreateTopic(c); err != nil {
		return nil, err
	}
	if _, err := b.fsm.Topic(c.Name); err == nil {
		return nil, fmt.Errorf("%w: %q", backend.ErrTopicExists, c.Name)
	}
	if err := b.stampCreateTopic(ctx, &c); err != nil {
		return nil, err
	}
	if c.Placement == nil {
		pl, epoch, err := b.placeTopic(ctx, c.Name, int(c.Partitions))
		if err != nil {
			return nil, err
		}
		c.Placement, c.PlacementEpoch = pl, epoch
	}
	data, err := fsm.EncodeCreateTopic(b.cfg.Now().UnixNano(), c)
	if err != nil {
		return nil, err
	}
	res, err := b.propose(ctx, data)
	if err != nil {
		return nil, err
	}
	t, _ := res.(*fsm.Topic)
	return t, nil
}

// deleteTopic proposes a topic deletion.
func (b *Backend) deleteTopic(ctx context.Context, name string) error {
	if _, err := b.fsm.Topic(name); err != nil {
		return err
	}
	data, err := fsm.EncodeJSON(fsm.CmdDeleteTopic, b.cfg.Now().UnixNano(), fsm.DeleteTopic{Name: name})
	if err != nil {
		return err
	}
	_, err = b.propose(ctx, data)
	return err
}

// alterTopic proposes new settings for a topic and returns the topic as
// altered.
func (b *Backend) alterTopic(ctx context.Context, c fsm.AlterTopic) (*fsm.Topic, error) {
	t, err := b.fsm.Topic(c.Name)
	if err != nil {
		return nil, err
	}
	if err := fsm.ValidateAlterTopic(t, c); err != nil {
		return nil, err
	}
	data, err := fsm.EncodeAlterTopic(b.cfg.Now().UnixNano(), c)
	if err != nil {
		return nil, err
	}
	res, err := b.propose(ctx, data)
	if err != nil {
		return nil, err
	}
	nt, _ := res.(*fsm.Topic)
	return nt, nil
}

// checkKeys refuses, on a topic whose cleanup.policy includes compact, a
// batch with a record without a key (backend.ErrKeyRequired). It decodes the
// batches (decompressing them) of compacted topics only. The leader
// checks it before proposing, as Kafka's brokers check it on produce; the
// state machine does not, so that replicas of builds before the check
// apply the same entries.
// With crcChecked (the caller verified the batches' CRCs) it decodes them
// without verifying them again.
func checkKeys(t *fsm.Topic, a fsm.Append, crcChecked bool) error {
	if !compacted(t) {
		return nil
	}
	for _, pb := range a.Batches {
		var d batch.Batch
		var err error
		if crcChecked {
			var info batch.Info
			if info, err = batch.Peek(pb.Batch); err == nil {
				d, _, err = batch.DecodeVerified(pb.Batch, info)
			}
		} else {
			d, _, err = batch.Decode(pb.Batch)
		}
		if err != nil {
			return fmt.Errorf("%w: %s-%d: %v", backend.ErrInvalidArgument, t.Name, pb.Partition, err)
		}
		for i := range d.Records {
			if d.Records[i].Key == nil {
				return keyRequired(t, fmt.Sprintf("record %d of the batch for partition %d", i, pb.Partition))
			}
		}
	}
	return nil
}

// compacted says whether t's cleanup.policy includes compact (as
// Topic.RetentionPolicy reads it).
func compacted(t *fsm.Topic) bool {
	return strings.Contains(t.Config[fsm.ConfigCleanupPolicy], "compact")
}

// keyRequired is backend.ErrKeyRequired for the record what names.
func keyRequired(t *fsm.Topic, what string) error {
	return fmt.Errorf("%w: %s has a null key, and topic %q has cleanup.policy %s, which keeps the last record of each key (a tombstone is a key with a null value)",
		backend.ErrKeyRequired, what, t.Name, t.Config[fsm.ConfigCleanupPolicy])
}

// Snapshot asks Raft for a snapshot now and waits for it.
func (n *Node) Snapshot() error {
	if err := n.raft.Snapshot().Error(); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}

// Close shuts Raft down, then closes the stores and the partition logs.
func (n *Node) Close() error {
	close(n.stop)
	<-n.done
	<-n.cleanerDone
	<-n.redriveDone
	<-n.registerDone
	<-n.syncerDone
	n.data.stopRunner()
	n.raft.DeregisterObserver(n.leaderObsv)
	n.awaitApplyWaiters()
	n.cuts.closeAll()
	errs := []error{n.data.close()}
	errs = append(errs, n.stores.shutdownRaft(n.raft))
	close(n.forwardStop)
	<-n.forwardDone
	errs = append(errs, n.stores.close(), n.fsm.Close())
	return errors.Join(errs...)
}

var _ io.Closer = (*Node)(nil)

// awaitApplyWaiters waits, for at most the apply timeout, until every
// proposal's wait has ended. A proposal whose caller gave up (its context
// ended) is still in Raft; while Raft runs it is committed or refused, but
// a Raft that shuts down drops the futures it has committed and not yet
// applied, and their waiters would never end. Without a quorum the wait
// runs out and those waiters outlive the node.
func (n *Node) awaitApplyWaiters() {
	deadline := time.Now().Add(n.cfg.ApplyTimeout)
	for n.applyWaiters.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}
