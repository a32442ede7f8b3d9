package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
	"github.com/logd-dev/logd/replication/raftstore"
)

// TestRaftTimeouts: the defaults follow the heartbeat timeout, and every
// setting Validate accepts is one hashicorp/raft accepts too.
func TestRaftTimeouts(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name                            string
		heartbeat, election, lease      time.Duration
		wantHeartbeat, wantElec, wantLs time.Duration
		wantErr                         bool
	}{
		{name: "defaults", wantHeartbeat: DefaultHeartbeatTimeout, wantElec: DefaultHeartbeatTimeout, wantLs: DefaultHeartbeatTimeout},
		{name: "heartbeat only", heartbeat: 500 * ms, wantHeartbeat: 500 * ms, wantElec: 500 * ms, wantLs: 500 * ms},
		{name: "all set", heartbeat: 200 * ms, election: 400 * ms, lease: 100 * ms, wantHeartbeat: 200 * ms, wantElec: 400 * ms, wantLs: 100 * ms},
		{name: "tests' shortest", heartbeat: 5 * ms, election: 5 * ms, lease: 5 * ms, wantHeartbeat: 5 * ms, wantElec: 5 * ms, wantLs: 5 * ms},
		{name: "lease beyond heartbeat", lease: time.Second, wantErr: true},
		{name: "lease beyond a set heartbeat", heartbeat: 100 * ms, lease: 200 * ms, wantErr: true},
		{name: "election below heartbeat", heartbeat: time.Second, election: 500 * ms, lease: 500 * ms, wantErr: true},
		{name: "too short", heartbeat: ms, wantErr: true},
		{name: "negative", heartbeat: -ms, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{NodeID: "n1", DataDir: t.TempDir(), RaftBind: "127.0.0.1:0",
				HeartbeatTimeout: tc.heartbeat, ElectionTimeout: tc.election, LeaderLeaseTimeout: tc.lease}
			err := cfg.Validate()
			if tc.wantErr {
				if !errors.Is(err, backend.ErrInvalidArgument) {
					t.Fatalf("Validate: %v, want backend.ErrInvalidArgument", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			cfg.setDefaults()
			cfg.Logger = slog.New(slog.DiscardHandler)
			rc := raftConfig(cfg, hclog.NewNullLogger())
			if rc.HeartbeatTimeout != tc.wantHeartbeat || rc.ElectionTimeout != tc.wantElec || rc.LeaderLeaseTimeout != tc.wantLs {
				t.Errorf("heartbeat %v, election %v, lease %v; want %v, %v, %v", rc.HeartbeatTimeout, rc.ElectionTimeout,
					rc.LeaderLeaseTimeout, tc.wantHeartbeat, tc.wantElec, tc.wantLs)
			}
			if err := raft.ValidateConfig(rc); err != nil {
				t.Errorf("raft refuses what Validate accepted: %v", err)
			}
		})
	}
}

// TestValidateRaftStoreOptions: options of the Raft stores that
// raftstore refuses are an ErrInvalidArgument of Validate, before
// anything opens.
func TestValidateRaftStoreOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{name: "unknown log store", edit: func(c *Config) { c.RaftLogStore = "rocks" }},
		{name: "segment too small", edit: func(c *Config) { c.WALSegmentBytes = raftstore.MinWALSegmentBytes - 1 }},
		{name: "segment too large", edit: func(c *Config) { c.WALSegmentBytes = raftstore.MaxWALSegmentBytes + 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{NodeID: "n1", DataDir: "d", RaftBind: "127.0.0.1:0"}
			tc.edit(&cfg)
			if err := cfg.Validate(); !errors.Is(err, backend.ErrInvalidArgument) || !errors.Is(err, raftstore.ErrInvalidOptions) {
				t.Fatalf("Validate: %v, want backend.ErrInvalidArgument and raftstore.ErrInvalidOptions", err)
			}
		})
	}
}

// TestLogStoreKept: a node started on either store keeps its records
// across a restart that names no store, holds its log where it said (a
// WAL directory, or entries in raft.db), and refuses a restart that names
// the other store without changing anything.
func TestLogStoreKept(t *testing.T) {
	for _, store := range []string{raftstore.LogStoreBoltDB, raftstore.LogStoreWAL} {
		t.Run(store, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			dir := t.TempDir()
			cfg := Config{DataDir: dir, RaftLogStore: store, Fatal: func(err error) { t.Errorf("fatal: %v", err) }}
			n := openSingleNode(t, ctx, cfg)
			if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "k", Partitions: 1}); err != nil {
				t.Fatal(err)
			}
			var want []string
			for i := range 5 {
				v := fmt.Sprintf("v%d", i)
				if _, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "k", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, v)}}}); err != nil {
					t.Fatal(err)
				}
				want = append(want, v)
			}
			if err := n.Close(); err != nil {
				t.Fatal(err)
			}
			_, statErr := os.Stat(filepath.Join(dir, "raft", "wal"))
			if hasWAL := statErr == nil; hasWAL != (store == raftstore.LogStoreWAL) {
				t.Fatalf("store %s: WAL directory present %v", store, hasWAL)
			}

			other := raftstore.LogStoreWAL
			if store == raftstore.LogStoreWAL {
				other = raftstore.LogStoreBoltDB
			}
			bad := cfg
			bad.NodeID, bad.RaftBind, bad.Logger = "n1", "127.0.0.1:0", fsmtest.Logger()
			bad.RaftLogStore = other
			if n, err := Open(bad); !errors.Is(err, raftstore.ErrLogStoreMismatch) {
				if err == nil {
					n.Close()
				}
				t.Fatalf("restart of a %s data dir asking for %s: %v, want raftstore.ErrLogStoreMismatch", store, other, err)
			}
			_, statErr = os.Stat(filepath.Join(dir, "raft", "wal"))
			if hasWAL := statErr == nil; hasWAL != (store == raftstore.LogStoreWAL) {
				t.Fatalf("the refused restart changed the data dir: WAL directory present %v", hasWAL)
			}

			cfg.RaftLogStore = ""
			n = openSingleNode(t, ctx, cfg)
			defer n.Close()
			if got := fsmtest.ReadAll(t, n.FSM(), "k", 0); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after restart %v, want %v", got, want)
			}
			last, err := n.stores.logs.LastIndex()
			if err != nil || last == 0 {
				t.Fatalf("the restarted node's log store is empty: %d, %v", last, err)
			}
		})
	}
}
