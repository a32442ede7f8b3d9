package replication

import (
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/observe"
	"github.com/logd-dev/logd/replication/raftstore"
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
// timeouts, so a bad setting is an backend.ErrInvalidArgument before anything
// opens.
func (c Config) validateRaftTimeouts() error {
	heartbeat, election, lease := c.raftTimeouts()
	switch {
	case min(heartbeat, election, lease) < minRaftTimeout:
		return fmt.Errorf("%w: raft timeouts must be at least %v (heartbeat %v, election %v, leader lease %v)",
			backend.ErrInvalidArgument, minRaftTimeout, heartbeat, election, lease)
	case lease > heartbeat:
		return fmt.Errorf("%w: raft leader lease timeout %v exceeds the heartbeat timeout %v", backend.ErrInvalidArgument, lease, heartbeat)
	case election < heartbeat:
		return fmt.Errorf("%w: raft election timeout %v is below the heartbeat timeout %v", backend.ErrInvalidArgument, election, heartbeat)
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

// raftStores are what Raft runs on: its log, stable store and snapshot
// store (package raftstore, under DataDir/raft) and its transport, TCP
// (openDiskStores) or in memory (openMemStores, Config.InMemory).
type raftStores struct {
	logs      raft.LogStore
	stable    raft.StableStore
	snaps     raft.SnapshotStore
	transport raft.Transport
	// port is the Raft port (package replication/transport) and layer
	// the group's side of it, under the TCP transport; nil in memory.
	port  *transport.Port
	layer *transport.Layer
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

// storeOptions are the options of cfg's Raft stores, hlog the logger
// of hashicorp/raft's own lines.
func (c Config) storeOptions(hlog hclog.Logger) raftstore.Options {
	return raftstore.Options{Dir: filepath.Join(c.DataDir, "raft"), InMemory: c.InMemory, LogStore: c.RaftLogStore,
		WALSegmentBytes: c.WALSegmentBytes, WrapWALFS: c.WrapRaftWALFS, Logger: c.Logger, RaftLogger: hlog}
}

// openDiskStores opens the Raft stores under DataDir/raft
// (raftstore.Open) and a TCP transport on RaftBind over the Raft port's
// stream layer (package replication/transport).
func openDiskStores(cfg Config, hlog hclog.Logger) (*raftStores, error) {
	st, err := raftstore.Open(cfg.storeOptions(hlog))
	if err != nil {
		return nil, err
	}
	// Without an advertise address the transport advertises the address
	// it actually bound (so ":0" works in tests).
	var adv net.Addr
	if cfg.RaftAdvertise != cfg.RaftBind {
		a, err := net.ResolveTCPAddr("tcp", cfg.RaftAdvertise)
		if err != nil {
			st.Close()
			return nil, fmt.Errorf("raft advertise address %q: %w", cfg.RaftAdvertise, err)
		}
		adv = a
	}
	secret, required, err := loadSecret(cfg)
	if err != nil {
		st.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.RaftBind)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("raft transport on %s: %w", cfg.RaftBind, err)
	}
	port := transport.NewPort(ln, adv, cfg.PeerTLS, cfg.NodeID, cfg.MaxRaftConns, cfg.Logger)
	port.SetSecret(secret, required)
	if a, ok := port.Addr().(*net.TCPAddr); !ok || a.IP == nil || a.IP.IsUnspecified() {
		ln.Close()
		st.Close()
		return nil, fmt.Errorf("%w: raft address %s is not one peers can dial: give an advertise address", backend.ErrInvalidArgument, port.Addr())
	}
	// Today's one group is group 0 of the port.
	layer := port.Group(0)
	// The address provider is asked for this node's own address too: it
	// is the transport's, known once it is bound.
	var tr *raft.NetworkTransport
	local := func() raft.ServerAddress { return tr.LocalAddr() }
	tr = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: layer, MaxPool: 3, Timeout: raftCallTimeout, Logger: hlog,
		ServerAddressProvider: transport.NewAddressProvider(cfg.Peers.Routes(), cfg.NodeID, local),
	})
	port.Start()
	stores := &raftStores{logs: st.Logs, stable: st.Stable, snaps: st.Snapshots, transport: tr, port: port, layer: layer,
		closers: []func() error{tr.Close, port.Close, st.Close}}
	stores.wrap(cfg.WrapRaftStores)
	return stores, nil
}

// raftCallTimeout bounds each Raft call between nodes (the transport's
// timeout; an InstallSnapshot's grows with the snapshot's size).
const raftCallTimeout = 10 * time.Second

// observeTransport wraps the stores' transport in observe.Transport and,
// on the Raft port, has it wait for a follower whose node refused a
// connection: until that node takes connections on the port again, for
// at most a call's timeout.
func (s *raftStores) observeTransport(obs *observe.Metrics, commits *observe.LeaderCommits, stop <-chan struct{}) (raft.Transport, *observe.Transport) {
	trans, observed := observe.WrapTransport(s.transport, obs, commits, stop)
	if layer := s.layer; layer != nil {
		observed.SetAwaitPeer(func(addr raft.ServerAddress) bool { return layer.AwaitPeer(addr, raftCallTimeout) })
	}
	return trans, observed
}

// shutdownRaft shuts r down, which waits for its calls in flight: those
// waiting for a peer that is down (observeTransport) end at once.
func (s *raftStores) shutdownRaft(r *raft.Raft) error {
	f := r.Shutdown()
	if s.layer != nil {
		s.layer.StopDials()
	}
	return f.Error()
}

// wrap applies Config.WrapRaftStores, if set; a log store wrapper that is
// an io.Closer is closed after the transport and before the stores (the
// last closer).
func (s *raftStores) wrap(w func(raft.LogStore, raft.StableStore) (raft.LogStore, raft.StableStore)) {
	if w == nil {
		return
	}
	s.logs, s.stable = w(s.logs, s.stable)
	if c, ok := s.logs.(io.Closer); ok {
		s.closers = slices.Insert(s.closers, len(s.closers)-1, c.Close)
	}
}

// openMemStores returns in-memory stores (raftstore.Options.InMemory)
// and an in-memory transport addressed RaftBind (a generated address if
// empty).
func openMemStores(cfg Config, hlog hclog.Logger) (*raftStores, error) {
	st, err := raftstore.Open(cfg.storeOptions(hlog))
	if err != nil {
		return nil, err
	}
	_, tr := raft.NewInmemTransport(raft.ServerAddress(cfg.RaftBind))
	stores := &raftStores{logs: st.Logs, stable: st.Stable, snaps: st.Snapshots, transport: tr,
		closers: []func() error{tr.Close, st.Close}}
	stores.wrap(cfg.WrapRaftStores)
	return stores, nil
}
