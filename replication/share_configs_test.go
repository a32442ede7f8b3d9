package replication

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
)

// TestShareGroupConfigReplicated: a share group's settings are changed
// only once every member's build applies the change (below
// fsm.ShareConfigLevel, a *backend.FeatureLevelError from the change and
// its validation, nothing proposed), only on the meta leader
// (ErrNotLeader on a follower), never with a bad value
// (*backend.ShareConfigError); once made, every replica answers them, and
// after the leadership moves the new leader has them and changes them.
func TestShareGroupConfigReplicated(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newMemCluster(t, ctx, 3)
	bs := make([]*Backend, len(c.nodes))
	for i, n := range c.nodes {
		bs[i] = NewBackend(n)
	}
	c.waitFor(ctx, "n1 registers its level", func() bool { return c.nodes[0].FSM().NodeFeatureLevel("n1") == fsm.Level })
	earliest := backend.AlterShareGroupConfig{Group: "g", Set: map[string]string{backend.ShareAutoOffsetReset: "earliest", backend.ShareDeliveryCountLimit: "3"}}
	want := backend.ShareGroupConfig{AutoOffsetReset: "earliest", DeliveryCountLimit: 3}

	for _, id := range []string{"n2", "n3"} {
		level := fsm.Level
		if id == "n3" {
			level = fsm.MovesLevel
		}
		if err := c.nodes[0].register(ctx, fsm.NodeRegister{ID: id, APIAddress: id + "-api", FeatureLevel: level}); err != nil {
			t.Fatal(err)
		}
	}
	applied := c.nodes[0].FSM().AppliedIndex()
	var fe *backend.FeatureLevelError
	if _, err := bs[0].AlterShareGroupConfig(ctx, earliest); !errors.As(err, &fe) || fe.Need != backend.FeatureLevel(fsm.ShareConfigLevel) || fe.Cluster != backend.FeatureLevel(fsm.MovesLevel) {
		t.Fatalf("change with a member at level %d: %v", fsm.MovesLevel, err)
	}
	if err := bs[0].ValidateShareGroupConfig(earliest); !errors.As(err, &fe) {
		t.Fatalf("validation with a member at level %d: %v", fsm.MovesLevel, err)
	}
	if got := bs[0].ShareGroupConfig("g"); got != (backend.ShareGroupConfig{}) || c.nodes[0].FSM().AppliedIndex() != applied {
		t.Fatalf("after refused changes: %+v, applied index %d, was %d", got, c.nodes[0].FSM().AppliedIndex(), applied)
	}
	if err := c.nodes[0].register(ctx, fsm.NodeRegister{ID: "n3", APIAddress: "n3-api", FeatureLevel: fsm.Level}); err != nil {
		t.Fatal(err)
	}

	var ce *backend.ShareConfigError
	bad := backend.AlterShareGroupConfig{Group: "g", Set: map[string]string{backend.ShareAutoOffsetReset: "earliest", backend.ShareDeliveryCountLimit: "0"}}
	if _, err := bs[0].AlterShareGroupConfig(ctx, bad); !errors.As(err, &ce) || ce.Name != backend.ShareDeliveryCountLimit || !errors.Is(err, backend.ErrInvalidConfig) {
		t.Fatalf("a limit of 0: %v", err)
	}
	if err := bs[1].ValidateShareGroupConfig(bad); !errors.As(err, &ce) {
		t.Fatalf("a limit of 0 validated on a follower: %v", err)
	}
	if _, err := bs[1].AlterShareGroupConfig(ctx, earliest); !errors.Is(err, backend.ErrNotLeader) {
		t.Fatalf("change on a follower: %v", err)
	}
	if got, err := bs[0].AlterShareGroupConfig(ctx, earliest); err != nil || got != want {
		t.Fatalf("change on the leader: %+v, %v", got, err)
	}
	c.waitFor(ctx, "every replica has the settings", func() bool {
		for _, b := range bs {
			if b.ShareGroupConfig("g") != want {
				return false
			}
		}
		return true
	})

	if err := c.nodes[0].raft.LeadershipTransfer().Error(); err != nil {
		t.Fatal(err)
	}
	var next *Backend
	c.waitFor(ctx, "another node leads", func() bool {
		for _, b := range bs[1:] {
			if b.IsLeader() && b.Ready() {
				next = b
				return true
			}
		}
		return false
	})
	if got := next.ShareGroupConfig("g"); got != want {
		t.Fatalf("the new leader's settings: %+v", got)
	}
	want.DeliveryCountLimit = 0
	if got, err := next.AlterShareGroupConfig(ctx, backend.AlterShareGroupConfig{Group: "g", Delete: []string{backend.ShareDeliveryCountLimit}}); err != nil || got != want {
		t.Fatalf("change on the new leader: %+v, %v", got, err)
	}
	c.waitFor(ctx, "the old leader has the new leader's change", func() bool { return bs[0].ShareGroupConfig("g") == want })
}
