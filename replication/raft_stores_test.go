package replication

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/logd-dev/logd/backend"
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
