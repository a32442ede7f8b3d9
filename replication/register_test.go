package replication

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/peer"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
)

// registrar is the Config.Register of a joinCluster's nodes: the Join the
// front end would make on the node called at member, counted, with each
// node's last request kept (nodes register on their own schedules: a
// follower also registers the cluster secret's fingerprint when it gets
// one).
type registrar struct {
	c *joinCluster

	// calls and last are guarded by c.mu.
	calls map[string]int
	last  map[string]backend.JoinRequest
}

func (r *registrar) ask(ctx context.Context, member string, req backend.JoinRequest) (string, error) {
	r.c.mu.Lock()
	if r.calls == nil {
		r.calls, r.last = map[string]int{}, map[string]backend.JoinRequest{}
	}
	r.calls[req.ID]++
	r.last[req.ID] = req
	n, silent := r.c.byAPI[member], r.c.silent[member]
	r.c.mu.Unlock()
	if n == nil || silent {
		return "", fmt.Errorf("dial %s: connection refused", member)
	}
	if err := n.Join(ctx, req, r.c.probe); err != nil {
		return "", err
	}
	return n.NodeID(), nil
}

// lastRequest is how many registrations node id made and its last one.
func (r *registrar) lastRequest(id string) (int, backend.JoinRequest) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.calls[id], r.last[id]
}

// TestFollowerRegistersNewLevel: in a rolling upgrade, a follower
// restarted with a build of a new feature level, without a join,
// registers its new level through the leader (Config.Register), while
// the same leader leads in the same term; the cluster's level stays at
// the lowest member's. Asking again with nothing changed adds no Raft
// entry.
func TestFollowerRegistersNewLevel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	old := fsm.Level - 1
	c := newJoinCluster(t)
	reg := &registrar{c: c}
	c.configure = func(_ string, cfg *Config) {
		cfg.FeatureLevel = backend.FeatureLevel(old)
		cfg.Register = reg.ask
	}
	l := c.open(ctx, "n1", true)
	n2, n3 := c.open(ctx, "n2", false), c.open(ctx, "n3", false)
	for _, n := range []*Node{n2, n3} {
		if err := l.Join(ctx, joinRequest(n), c.probe); err != nil {
			t.Fatal(err)
		}
	}
	waitRegistry(ctx, t, l, "every node at the old level", func() bool {
		for _, id := range []string{"n1", "n2", "n3"} {
			if l.FSM().NodeFeatureLevel(id) != old {
				return false
			}
		}
		return true
	})
	before, _ := l.FSM().Node("n3")
	term := l.raft.CurrentTerm()

	// n3 comes back with the new build, and no join. A heartbeat timeout
	// of a minute keeps it from campaigning: only the leader can register
	// it.
	n3 = c.restart(n3, func(cfg *Config) {
		cfg.FeatureLevel = backend.FeatureLevel(fsm.Level)
		cfg.HeartbeatTimeout, cfg.ElectionTimeout = time.Minute, time.Minute
	})
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	waitRegistry(wctx, t, l, "n3 registers the new level", func() bool { return l.FSM().NodeFeatureLevel("n3") == fsm.Level })
	after, _ := l.FSM().Node("n3")
	if want := before; after.APIAddress != want.APIAddress || after.PeerAddress != want.PeerAddress || after.KafkaAddress != want.KafkaAddress {
		t.Errorf("n3 registered %+v, was %+v: only the level should change", after, before)
	}
	if !l.IsLeader() || l.raft.CurrentTerm() != term {
		t.Errorf("leader changed: n1 leads %v, term %d, was %d", l.IsLeader(), l.raft.CurrentTerm(), term)
	}
	if got, err := l.featureLevel(); err != nil || got != old {
		t.Errorf("cluster level %d, %v; want %d while n1 and n2 run the old build", got, err, old)
	}
	waitRegistry(ctx, t, n3, "n3 applies its registration", func() bool { return n3.FSM().NodeFeatureLevel("n3") == fsm.Level })
	// Status shows each member's registered level, the node's own, and
	// the cluster's: what an operator checks during an upgrade.
	st, st3 := l.Status(), n3.Status()
	levels := map[string]fsm.FeatureLevel{}
	for _, m := range st.Members {
		levels[m.ID] = fsm.FeatureLevel(m.FeatureLevel)
	}
	if want := map[string]fsm.FeatureLevel{"n1": old, "n2": old, "n3": fsm.Level}; !maps.Equal(levels, want) {
		t.Errorf("status shows levels %v, want %v", levels, want)
	}
	if bl := backend.FeatureLevel(old); st.BuildLevel != bl || st.ClusterLevel != bl || st3.BuildLevel != backend.FeatureLevel(fsm.Level) || st3.ClusterLevel != bl || st.AppliedLevel != backend.FeatureLevel(l.FSM().AppliedLevel()) {
		t.Errorf("status levels: n1 build %d, cluster %d, applied %d; n3 build %d, cluster %d", st.BuildLevel, st.ClusterLevel, st.AppliedLevel, st3.BuildLevel, st3.ClusterLevel)
	}

	// Asked again with nothing changed, the leader proposes nothing.
	calls, req := reg.lastRequest("n3")
	if calls == 0 || !req.RegisterOnly || req.ID != "n3" || req.FeatureLevel != backend.FeatureLevel(fsm.Level) {
		t.Fatalf("%d requests, the last %+v; want n3's registration at level %d", calls, req, fsm.Level)
	}
	last := l.raft.LastIndex()
	if _, err := reg.ask(ctx, l.APIAddress(), req); err != nil {
		t.Fatal(err)
	}
	if got := l.raft.LastIndex(); got != last {
		t.Errorf("a registration that changes nothing added entries %d..%d", last+1, got)
	}

	// A node that is not a member is not added by a registration.
	n4 := c.open(ctx, "n4", false)
	stranger := joinRequest(n4)
	stranger.RegisterOnly = true
	if err := l.Join(ctx, stranger, c.probe); !errors.Is(err, backend.ErrUnknownNode) {
		t.Errorf("registration of a non-member: %v, want backend.ErrUnknownNode", err)
	}
	// What it would change: the membership and the registry. (The log
	// itself may grow meanwhile: the leader runs other work.)
	_, registered := l.FSM().NodeAddress("n4")
	if m, _ := l.member("n4"); m != nil || registered {
		t.Errorf("registration of a non-member changed the cluster: member %+v, registered %v", m, registered)
	}
}

// TestRegistrationBackoff: failed attempts wait twice as long each time,
// up to registerMaxBackoff; a success waits the settle time and clears
// the backoff; a new leader is asked at once.
func TestRegistrationBackoff(t *testing.T) {
	now := time.Unix(1000, 0)
	var r registration
	r.sawLeader("n1")
	var pauses []time.Duration
	for range 8 {
		pauses = append(pauses, r.fail(now))
	}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	if !slices.Equal(pauses, want) || r.failures != 8 || !r.next.Equal(now.Add(registerMaxBackoff)) {
		t.Fatalf("pauses %v, failures %d, next %v; want %v", pauses, r.failures, r.next, want)
	}
	r.sawLeader("n1")
	if !r.next.Equal(now.Add(registerMaxBackoff)) {
		t.Fatalf("the same leader reset the pause: next %v", r.next)
	}
	r.sawLeader("n2")
	if !r.next.IsZero() || r.backoff != 0 {
		t.Fatalf("a new leader waits: next %v, backoff %v", r.next, r.backoff)
	}
	r.fail(now)
	r.succeed(now, registerSettle)
	if r.failures != 0 || r.backoff != 0 || !r.next.Equal(now.Add(registerSettle)) {
		t.Fatalf("after a success: %+v", r)
	}
	if got := r.fail(now); got != registerMinBackoff {
		t.Fatalf("first pause after a success %v, want %v", got, registerMinBackoff)
	}
}

// waitRegistry polls cond on n until it holds or ctx ends.
func waitRegistry(ctx context.Context, t *testing.T, n *Node, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v; %s's registry: %+v", what, ctx.Err(), n.NodeID(), n.FSM().Nodes())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestPeerRoutesFollowTheRegistry: attached to a resolver (as Open does),
// the node registry routes a node's API and peer addresses to its API
// route; an address no node is registered at is dialed as it is.
func TestPeerRoutesFollowTheRegistry(t *testing.T) {
	f, _ := fsmtest.New(t, t.TempDir(), nil)
	f.ApplyBatch(fsmtest.Entries(
		fsmtest.Command(t, fsm.CmdNodeRegister, 1, fsm.NodeRegister{ID: "a", APIAddress: "a:1", PeerAddress: "a:9"}),
		fsmtest.Command(t, fsm.CmdNodeRegister, 2, fsm.NodeRegister{ID: "b", APIAddress: "b:1"})))
	r := peer.NewResolver(peer.Routes{"a": {Raft: "p:1", API: "p:2"}, "b": {Raft: "p:3"}})
	r.Attach(registeredAt(f))
	for addr, want := range map[string]string{"a:1": "p:2", "a:9": "p:2", "b:1": "b:1", "c:1": "c:1", "": ""} {
		if got := r.API(addr); got != want {
			t.Errorf("API(%q) = %q, want %q", addr, got, want)
		}
	}
}
