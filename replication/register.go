package replication

import (
	"context"
	"log/slog"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
)

// Self-registration. Every node keeps its own entry of the node registry
// current: its client API, peer and Kafka addresses, and the feature
// level it runs at. The cluster's level is the lowest a member registered
// (features.go), so a member that restarts with a new build and does not
// register it holds the whole cluster at the old level, silently. A leader
// proposes its entry itself. A follower asks the leader, through
// Config.Register, with the call a join makes (over the same
// authenticated node-to-node path: the leader registers only a caller
// that proved to be the node it names, checkJoinCaller) and with
// backend.JoinRequest.RegisterOnly, so the leader never adds or promotes it.
// Nothing is asked or proposed while the registry this node has applied
// holds its entry, so a steady cluster writes nothing, and the leader
// proposes nothing for a request that changes nothing (planJoin).

const (
	// registerInterval is how often a node compares its entry with the
	// registry it has applied.
	registerInterval = 50 * time.Millisecond
	// registerMinBackoff and registerMaxBackoff bound the pause after a
	// failed attempt, doubled at each failure; a new leader is asked at
	// once.
	registerMinBackoff = 250 * time.Millisecond
	registerMaxBackoff = 10 * time.Second
	// registerSettle is how long a follower waits for the entry the
	// leader accepted to reach its own state machine before it asks
	// again (the leader answers once the entry is applied there).
	registerSettle = 2 * time.Second
	// registerAttemptTimeout bounds one attempt: the leader asks the node
	// first (joinProbeTimeout), then commits the entry.
	registerAttemptTimeout = 10 * time.Second
	// registerQuietFailures are the first failures logged at debug
	// level: a node that has just started is asked by the leader before
	// its listeners serve.
	registerQuietFailures = 2
)

// registration is the self-registration goroutine's state.
type registration struct {
	// leader is the leader the node last saw.
	leader string
	// next is when the next attempt may start.
	next time.Time
	// backoff is the pause after the last failure, 0 after a success;
	// failures counts them since.
	backoff  time.Duration
	failures int
}

// fail records a failed attempt at now and returns the pause before the
// next.
func (r *registration) fail(now time.Time) time.Duration {
	r.failures++
	r.backoff = min(max(2*r.backoff, registerMinBackoff), registerMaxBackoff)
	r.next = now.Add(r.backoff)
	return r.backoff
}

// succeed records an accepted attempt at now; the next one waits settle.
func (r *registration) succeed(now time.Time, settle time.Duration) {
	r.failures, r.backoff = 0, 0
	r.next = now.Add(settle)
}

// sawLeader notes the current leader: a new one is asked at once, with
// the backoff reset.
func (r *registration) sawLeader(id string) {
	if id != r.leader {
		r.leader = id
		r.next, r.backoff = time.Time{}, 0
	}
}

// ownEntry is the registry entry this node wants for itself.
func (n *Node) ownEntry() fsm.RegisteredNode {
	e := fsm.RegisteredNode{ID: n.cfg.NodeID, APIAddress: n.cfg.APIAdvertise, FeatureLevel: n.buildLevel(),
		PeerAddress: n.cfg.PeerAdvertise, KafkaAddress: n.cfg.KafkaAdvertise}
	if n.secretAware() {
		e.SecretFingerprint = fingerprint(n.clusterSecretKey())
	}
	return e
}

// runRegistration keeps this node's registry entry current, and hands
// over the cluster secret (secret.go), until Close.
// It waits until the node is ready: the registry of a node still
// replaying its log is an old one.
func (n *Node) runRegistration() {
	defer close(n.registerDone)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(registerInterval)
	defer t.Stop()
	var (
		r registration
		h handover
	)
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		n.registerOnce(ctx, &r)
		n.handOverSecret(ctx, &h)
	}
}

// registerOnce makes one attempt at registering this node when the
// registry it has applied lacks its entry and no pause is due: as
// leader, it proposes the entry; as a follower that is a member of the
// configuration, it asks the leader at its call address. A node with no
// API address to register, one not ready, and one that is not a member
// yet (a joining node: its join registers it) do nothing.
func (n *Node) registerOnce(ctx context.Context, r *registration) {
	if n.cfg.APIAdvertise == "" || !n.ready.Load() {
		return
	}
	want := n.ownEntry()
	if cur, ok := n.fsm.Node(want.ID); ok && cur == want {
		r.succeed(time.Time{}, 0)
		return
	}
	_, leader := n.raft.LeaderWithID()
	r.sawLeader(string(leader))
	if leader == "" || time.Now().Before(r.next) {
		return
	}
	reg := fsm.NodeRegister(want)
	actx, cancel := context.WithTimeout(ctx, registerAttemptTimeout)
	defer cancel()
	var err error
	via := string(leader)
	switch {
	case string(leader) == n.cfg.NodeID:
		err = n.register(actx, reg)
	case n.cfg.Register == nil:
		return
	default:
		if m, merr := n.member(n.cfg.NodeID); merr != nil || m == nil {
			return
		}
		addr, _ := n.LeaderCallAddress()
		if addr == "" {
			return // the leader has not registered itself yet
		}
		via = addr
		req := backend.JoinRequest{ID: want.ID, RaftAddress: string(n.stores.transport.LocalAddr()), APIAddress: want.APIAddress,
			FeatureLevel: backend.FeatureLevel(want.FeatureLevel), PeerAddress: want.PeerAddress, KafkaAddress: want.KafkaAddress, RegisterOnly: true,
			SecretFingerprint: want.SecretFingerprint}
		_, err = n.cfg.Register(actx, addr, req)
	}
	now := time.Now()
	if err != nil {
		if ctx.Err() != nil {
			return // closing
		}
		pause := r.fail(now)
		level := slog.LevelWarn
		if r.failures <= registerQuietFailures {
			level = slog.LevelDebug
		}
		n.cfg.Logger.Log(ctx, level, "register own addresses and feature level; retrying", "leader", string(leader), "via", via,
			"feature_level", want.FeatureLevel, "attempt", r.failures, "retry_in", pause, "err", err)
		return
	}
	r.succeed(now, registerSettle)
	n.cfg.Logger.Info("registered own addresses and feature level", "leader", string(leader), "via", via,
		"feature_level", want.FeatureLevel, "api", want.APIAddress, "peer", want.PeerAddress, "kafka", want.KafkaAddress)
}

// registeredAt is the node registry of f as the peer resolver's lookup
// (peer.Resolver.Attach): the id of the node registered at addr, as its
// client API address or its peer address.
func registeredAt(f *fsm.FSM) func(addr string) (string, bool) {
	return func(addr string) (string, bool) {
		for _, n := range f.Nodes() {
			if n.APIAddress == addr || n.PeerAddress != "" && n.PeerAddress == addr {
				return n.ID, true
			}
		}
		return "", false
	}
}
