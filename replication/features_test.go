package replication

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
)

func TestClusterLevel(t *testing.T) {
	for _, tc := range []struct {
		name       string
		members    []string
		registered map[string]fsm.FeatureLevel
		want       fsm.FeatureLevel
	}{
		{name: "no members", want: fsm.BaseLevel},
		{name: "one member at this build's level", members: []string{"a"}, registered: map[string]fsm.FeatureLevel{"a": fsm.Level}, want: fsm.Level},
		{name: "an unregistered member counts as base", members: []string{"a", "b"}, registered: map[string]fsm.FeatureLevel{"a": 3}, want: fsm.BaseLevel},
		{name: "the lowest member rules", members: []string{"a", "b", "c"}, registered: map[string]fsm.FeatureLevel{"a": 3, "b": 2, "c": 3}, want: min(2, fsm.Level)},
		{name: "never above this build", members: []string{"a", "b"}, registered: map[string]fsm.FeatureLevel{"a": fsm.Level + 1, "b": fsm.Level + 1}, want: fsm.Level},
		{name: "a registered node that left does not count", members: []string{"a"}, registered: map[string]fsm.FeatureLevel{"a": fsm.Level, "gone": fsm.BaseLevel}, want: fsm.Level},
	} {
		t.Run(tc.name, func(t *testing.T) {
			level := func(id string) fsm.FeatureLevel {
				if l, ok := tc.registered[id]; ok {
					return l
				}
				return fsm.BaseLevel
			}
			if got := clusterLevel(tc.members, level); got != tc.want {
				t.Fatalf("cluster level %d, want %d", got, tc.want)
			}
		})
	}
}

func TestProposalFeatureGate(t *testing.T) {
	for _, tc := range []struct {
		name          string
		need, cluster fsm.FeatureLevel
		refused       bool
	}{
		{name: "base kind in a base cluster", need: 1, cluster: 1},
		{name: "new kind in an old cluster", need: 2, cluster: 1, refused: true},
		{name: "new kind once every member knows it", need: 2, cluster: 2},
		{name: "old kind in a newer cluster", need: 1, cluster: 3},
		{name: "two levels ahead", need: 4, cluster: 3, refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := allows("some-kind", tc.need, tc.cluster)
			if !tc.refused {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var fe *backend.FeatureLevelError
			if !errors.Is(err, backend.ErrFeatureLevel) || !errors.As(err, &fe) || fe.Need != backend.FeatureLevel(tc.need) || fe.Cluster != backend.FeatureLevel(tc.cluster) || fe.Command != "some-kind" {
				t.Fatalf("got %v", err)
			}
		})
	}
}

// TestFeatureLevelRegistered: a leader registers its build's feature level
// with its address; the cluster's level follows; every kind of this build
// passes the gate, and a command this build would not apply itself is
// refused before it reaches the Raft log.
func TestFeatureLevelRegistered(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := openSingleNode(t, ctx, Config{DataDir: t.TempDir(), APIAdvertise: "127.0.0.1:1", Fatal: func(err error) { t.Errorf("fatal: %v", err) }})
	defer n.Close()
	for tick := time.NewTicker(10 * time.Millisecond); n.FSM().NodeFeatureLevel("n1") != fsm.Level || len(n.FSM().Nodes()) == 0; {
		select {
		case <-ctx.Done():
			t.Fatalf("registry %+v", n.FSM().Nodes())
		case <-tick.C:
		}
	}
	if nodes := n.FSM().Nodes(); nodes[0].FeatureLevel != fsm.Level {
		t.Fatalf("registry %+v", nodes)
	}
	if got, err := n.featureLevel(); err != nil || got != fsm.Level {
		t.Fatalf("cluster level %d, %v", got, err)
	}
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	applied := n.FSM().AppliedIndex()
	unknown := []byte{99, 1, 0, 0, 0, 0, 0, 0, 0, 0}
	if _, err := n.propose(ctx, unknown); !errors.Is(err, backend.ErrUnknownCommand) {
		t.Fatalf("unknown command proposed: %v", err)
	}
	newer := fsmtest.Command(t, fsm.CmdCreateTopic, 1, fsm.CreateTopic{Name: "v", Partitions: 1})
	newer[1] = 7 // a payload version of a later build
	if _, err := n.propose(ctx, newer); !errors.Is(err, backend.ErrUnknownCommand) {
		t.Fatalf("unknown version proposed: %v", err)
	}
	if err := n.FSM().Failed(); err != nil || n.FSM().AppliedIndex() != applied {
		t.Fatalf("after refused proposals: failed %v, applied %d, was %d", err, n.FSM().AppliedIndex(), applied)
	}
}
