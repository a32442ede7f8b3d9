package replication

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// raftStores are what Raft runs on: its log, stable store, snapshot store
// and transport, on disk and TCP (openDiskStores) or in memory
// (openMemStores, Config.InMemory).
type raftStores struct {
	logs      raft.LogStore
	stable    raft.StableStore
	snaps     raft.SnapshotStore
	transport raft.Transport
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

// openDiskStores opens the Raft log and stable store (bbolt) and the
// snapshot store under DataDir/raft, and a TCP transport on RaftBind.
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
		BoltOptions: &bbolt.Options{Timeout: 5 * time.Second, FreelistType: bbolt.FreelistMapType, NoFreelistSync: true},
	})
	if err != nil {
		return nil, fmt.Errorf("open raft log store: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(raftDir, 2, hlog)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("open snapshot store: %w", err)
	}
	// Without an advertise address the transport advertises the address
	// it actually bound (so ":0" works in tests).
	var adv net.Addr
	if cfg.RaftAdvertise != cfg.RaftBind {
		a, err := net.ResolveTCPAddr("tcp", cfg.RaftAdvertise)
		if err != nil {
			store.Close()
			return nil, fmt.Errorf("raft advertise address %q: %w", cfg.RaftAdvertise, err)
		}
		adv = a
	}
	transport, err := raft.NewTCPTransportWithLogger(cfg.RaftBind, adv, 3, 10*time.Second, hlog)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("raft transport on %s: %w", cfg.RaftBind, err)
	}
	return &raftStores{logs: store, stable: store, snaps: snaps, transport: transport,
		closers: []func() error{transport.Close, store.Close}}, nil
}

// openMemStores returns in-memory stores and an in-memory transport
// addressed RaftBind (a generated address if empty).
func openMemStores(cfg Config, _ hclog.Logger) (*raftStores, error) {
	store := raft.NewInmemStore()
	_, transport := raft.NewInmemTransport(raft.ServerAddress(cfg.RaftBind))
	return &raftStores{logs: store, stable: store, snaps: raft.NewInmemSnapshotStore(), transport: transport,
		closers: []func() error{transport.Close}}, nil
}
