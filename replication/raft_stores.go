package replication

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/logd-dev/logd/internal/slogbridge"
	"github.com/logd-dev/logd/replication/transport"
)

// Raft's timing. A follower that has heard nothing from the leader for
// HeartbeatTimeout stands for election, but only when a timer that fires
// at random between one and two heartbeat timeouts finds it so; the leader
// sends a heartbeat every tenth of the timeout. With pre-vote (on in
// hashicorp/raft) a voter refuses a candidate while it still knows a
// leader, so after a leader dies the election is won only once every
// survivor of a majority has timed out: between one and three heartbeat
// timeouts after the last heartbeat, about two in the middle. The new
// leader then applies a barrier of its term (Node.Ready), a few
// milliseconds.
//
// A shorter timeout fails over faster but calls an election whenever a
// follower misses heartbeats that long: a stall of the process (a GC
// pause, a starved CPU, a slow disk holding Raft's main loop), not a dead
// leader. DefaultHeartbeatTimeout keeps a failover well under a second,
// while even a 2-core machine saturated by produce load (race detector on)
// seldom stalls a node that long; a single follower's timeout calls no
// election, since the other voters still know the leader (cmd/logd
// TestClusterFailoverTime and TestClusterElectionsUnderLoad measure both).
//
// The election timeout only spaces a candidate's retries after a split or
// refused vote; it defaults to the heartbeat timeout. The leader lease
// makes a leader cut off from a majority step down; it shortens no
// failover, and a lease shorter than the heartbeat timeout only makes a
// busy leader step down sooner for nothing, so it defaults to the longest
// hashicorp/raft allows, the heartbeat timeout.
const (
	// DefaultHeartbeatTimeout is Config.HeartbeatTimeout's default.
	DefaultHeartbeatTimeout = 300 * time.Millisecond
	// minRaftTimeout is the shortest timeout hashicorp/raft accepts.
	minRaftTimeout = 5 * time.Millisecond
)

// raftTimeouts returns the heartbeat, election and leader-lease timeouts
// of c with their defaults.
func (c Config) raftTimeouts() (heartbeat, election, lease time.Duration) {
	heartbeat = c.HeartbeatTimeout
	if heartbeat == 0 {
		heartbeat = DefaultHeartbeatTimeout
	}
	election, lease = c.ElectionTimeout, c.LeaderLeaseTimeout
	if election == 0 {
		election = heartbeat
	}
	if lease == 0 {
		lease = heartbeat
	}
	return heartbeat, election, lease
}

// validateRaftTimeouts checks what hashicorp/raft requires of the
// timeouts, so a bad setting is an ErrInvalidArgument before anything
// opens.
func (c Config) validateRaftTimeouts() error {
	heartbeat, election, lease := c.raftTimeouts()
	switch {
	case min(heartbeat, election, lease) < minRaftTimeout:
		return fmt.Errorf("%w: raft timeouts must be at least %v (heartbeat %v, election %v, leader lease %v)",
			ErrInvalidArgument, minRaftTimeout, heartbeat, election, lease)
	case lease > heartbeat:
		return fmt.Errorf("%w: raft leader lease timeout %v exceeds the heartbeat timeout %v", ErrInvalidArgument, lease, heartbeat)
	case election < heartbeat:
		return fmt.Errorf("%w: raft election timeout %v is below the heartbeat timeout %v", ErrInvalidArgument, election, heartbeat)
	}
	return nil
}

// raftConfig is hashicorp/raft's configuration for cfg (defaults set).
func raftConfig(cfg Config, hlog hclog.Logger) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = hlog
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	rc.MaxAppendEntries = 1024
	rc.BatchApplyCh = cfg.BatchApplyCh
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = cfg.raftTimeouts()
	// Keep the snapshot on disk authoritative at startup: Restore reopens
	// local logs and checks them against the manifest.
	rc.NoSnapshotRestoreOnStart = false
	return rc
}

// raftStores are what Raft runs on: its log, stable store, snapshot store
// and transport, on disk and TCP (openDiskStores) or in memory
// (openMemStores, Config.InMemory).
type raftStores struct {
	logs      raft.LogStore
	stable    raft.StableStore
	snaps     raft.SnapshotStore
	transport raft.Transport
	// stream is the TCP transport's stream layer, the Raft port (package
	// replication/transport); nil in memory.
	stream *transport.Stream
	// closers release the transport and the stores, in this order.
	closers []func() error
}

// close releases the transport and the stores.
func (s *raftStores) close() error {
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// openDiskStores opens the Raft stable store (bbolt), the log store (the
// same bbolt file or a WAL, logstore.go) and the snapshot store under
// DataDir/raft, and a TCP transport on RaftBind
// over the Raft port's stream layer (package replication/transport).
func openDiskStores(cfg Config, hlog hclog.Logger) (*raftStores, error) {
	raftDir := filepath.Join(cfg.DataDir, "raft")
	if err := os.MkdirAll(raftDir, 0o755); err != nil {
		return nil, fmt.Errorf("create raft dir: %w", err)
	}
	store, err := raftboltdb.New(raftboltdb.Options{
		Path: filepath.Join(raftDir, "raft.db"),
		// The raft log churns: entries are written once and deleted after
		// the next snapshot. A hashmap freelist that is rebuilt on open
		// instead of written on every commit keeps each commit's write small.
		BoltOptions: &bbolt.Options{Timeout: 5 * time.Second, FreelistType: bbolt.FreelistMapType, NoFreelistSync: true,
			Logger: slogbridge.Bbolt(cfg.Logger.With("logger", "bbolt"))},
	})
	if err != nil {
		return nil, fmt.Errorf("open raft stable store: %w", err)
	}
	logs, _, err := openLogStore(cfg, raftDir, store, hlog)
	if err != nil {
		store.Close()
		return nil, err
	}
	// closeStores closes the log store, if it is not the stable store,
	// then the stable store.
	closeStores := store.Close
	if c, ok := logs.(io.Closer); ok && logs != raft.LogStore(store) {
		closeStores = func() error { return errors.Join(c.Close(), store.Close()) }
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(raftDir, 2, hlog)
	if err != nil {
		closeStores()
		return nil, fmt.Errorf("open snapshot store: %w", err)
	}
	// Without an advertise address the transport advertises the address
	// it actually bound (so ":0" works in tests).
	var adv net.Addr
	if cfg.RaftAdvertise != cfg.RaftBind {
		a, err := net.ResolveTCPAddr("tcp", cfg.RaftAdvertise)
		if err != nil {
			closeStores()
			return nil, fmt.Errorf("raft advertise address %q: %w", cfg.RaftAdvertise, err)
		}
		adv = a
	}
	ln, err := net.Listen("tcp", cfg.RaftBind)
	if err != nil {
		closeStores()
		return nil, fmt.Errorf("raft transport on %s: %w", cfg.RaftBind, err)
	}
	stream := transport.NewStream(ln, adv, cfg.PeerTLS, cfg.MaxRaftConns, cfg.Logger)
	if a, ok := stream.Addr().(*net.TCPAddr); !ok || a.IP == nil || a.IP.IsUnspecified() {
		ln.Close()
		closeStores()
		return nil, fmt.Errorf("%w: raft address %s is not one peers can dial: give an advertise address", ErrInvalidArgument, stream.Addr())
	}
	// The address provider is asked for this node's own address too: it
	// is the transport's, known once it is bound.
	var tr *raft.NetworkTransport
	local := func() raft.ServerAddress { return tr.LocalAddr() }
	tr = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: 3, Timeout: 10 * time.Second, Logger: hlog,
		ServerAddressProvider: transport.NewAddressProvider(cfg.Peers.Routes(), cfg.NodeID, local),
	})
	stream.Start()
	stores := &raftStores{logs: logs, stable: store, snaps: snaps, transport: tr, stream: stream,
		closers: []func() error{tr.Close, closeStores}}
	stores.wrap(cfg.WrapRaftStores)
	return stores, nil
}

// wrap applies Config.WrapRaftStores, if set; a log store wrapper that is
// an io.Closer is closed after the transport and before the stores.
func (s *raftStores) wrap(w func(raft.LogStore, raft.StableStore) (raft.LogStore, raft.StableStore)) {
	if w == nil {
		return
	}
	s.logs, s.stable = w(s.logs, s.stable)
	if c, ok := s.logs.(io.Closer); ok {
		s.closers = slices.Insert(s.closers, 1, c.Close)
	}
}

// openMemStores returns in-memory stores and an in-memory transport
// addressed RaftBind (a generated address if empty).
func openMemStores(cfg Config, _ hclog.Logger) (*raftStores, error) {
	store := raft.NewInmemStore()
	_, transport := raft.NewInmemTransport(raft.ServerAddress(cfg.RaftBind))
	stores := &raftStores{logs: store, stable: store, snaps: raft.NewInmemSnapshotStore(), transport: transport,
		closers: []func() error{transport.Close}}
	stores.wrap(cfg.WrapRaftStores)
	return stores, nil
}
