package replication

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/logd-dev/logd/backend"

	"github.com/logd-dev/logd/peer"
)

// AskJoin makes one attempt to join a cluster: it asks the member whose
// client API is at member to add the node req describes, and returns the id
// of the leader that added it. The member forwards the call to the leader,
// which answers once the node has caught up and is a voter (Join), so one
// attempt may last as long as the catch-up. The front end implements it over
// the client API, as it implements catchup.SegmentSource; this package does not
// speak the client API.
type AskJoin func(ctx context.Context, member string, req backend.JoinRequest) (leaderID string, err error)

const (
	// joinAttemptTimeout bounds one attempt, catch-up included: a node that
	// needs a snapshot and every segment copied may take minutes.
	joinAttemptTimeout = 10 * time.Minute
	// joinRetryInterval is the pause after a failed attempt.
	joinRetryInterval = time.Second
)

// JoinCluster asks the cluster member whose client API is at member to add
// this node, through ask, and retries until an attempt succeeds or ctx ends;
// it returns the leader's id, or ctx's error. A node opened without
// Bootstrap and without Raft state runs it once serving. Joining again is
// harmless: a voter at the same addresses changes nothing, and one at a new
// API address is re-registered once its old address no longer answers as
// this node (a restart on another port). Every refusal is retried, a
// conflict included: it may clear once an operator removes the old member.
//
// Before it joins, a node that holds no cluster secret asks member for
// it (Config.AskSecret, secret.go), so that its Raft port proves the
// secret by the time the leader first dials it.
func (n *Node) JoinCluster(ctx context.Context, member string, ask AskJoin) (string, error) {
	leader, joined, err := n.fetchSecret(ctx, member, n.cfg.AskSecret)
	if err != nil || joined {
		return leader, err
	}
	return joinLoop(ctx, n.cfg.Logger, member, n.joinRequest(), ask, joinAttemptTimeout, joinRetryInterval)
}

// joinRequest is this node's request to join. The transport's address is
// the advertised one, or the one it bound when RaftBind asked for any
// port.
func (n *Node) joinRequest() backend.JoinRequest {
	return backend.JoinRequest{ID: n.cfg.NodeID, RaftAddress: string(n.stores.transport.LocalAddr()), APIAddress: n.cfg.APIAdvertise, FeatureLevel: backend.FeatureLevel(n.buildLevel()),
		PeerAddress: n.cfg.PeerAdvertise, KafkaAddress: n.cfg.KafkaAdvertise, SecretFingerprint: n.ownEntry().SecretFingerprint}
}

// joinLoop is JoinCluster with its timings as arguments.
func joinLoop(ctx context.Context, logger *slog.Logger, member string, req backend.JoinRequest, ask AskJoin, attemptTimeout, retry time.Duration) (string, error) {
	if member == "" || ask == nil {
		return "", fmt.Errorf("%w: joining needs a member's address and a way to ask it", backend.ErrInvalidArgument)
	}
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		leader, err := ask(actx, member, req)
		cancel()
		if err == nil {
			if !req.SecretOnly {
				logger.Info("joined the cluster", "via", member, "leader", leader)
			}
			return leader, nil
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("join via %s: %w", member, ctx.Err())
		}
		what := "join"
		if req.SecretOnly {
			what = "asking for the cluster secret"
		}
		logger.Warn(what+" failed; retrying", "via", member, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("join via %s: %w", member, ctx.Err())
		case <-time.After(retry):
		}
	}
}

// The leader's side of a join: what it checks before it changes anything,
// and how it decides that a joining node has caught up (cluster.go runs
// them).

const (
	// joinProbeTimeout bounds one question to a node (its API, or a
	// connection to its Raft address).
	joinProbeTimeout = 2 * time.Second
	// joinPollInterval is how often the leader asks a joining node how far
	// it has applied.
	joinPollInterval = 100 * time.Millisecond
	// joinMaxLag is how many entries a non-voter may still be behind the
	// leader's commit index when it is promoted.
	joinMaxLag = 64
	// joinSilence ends a catch-up wait once the joining node has not
	// answered for this long; it stays a non-voter.
	joinSilence = 30 * time.Second
	// joinCatchUpTimeout bounds a catch-up wait however the caller's
	// context is set, so one join cannot hold the change slot for ever.
	joinCatchUpTimeout = 15 * time.Minute
	// maxNodeIDLen and maxAddressLen bound a join request's strings.
	maxNodeIDLen  = 128
	maxAddressLen = 261
)

// callAddress is where the leader asks a joining node: its peer address,
// or its API address when it gives none.
func callAddress(req backend.JoinRequest) string {
	if req.PeerAddress != "" {
		return req.PeerAddress
	}
	return req.APIAddress
}

// validateJoin checks a join request's form: a node id of letters, digits
// and ".-_:@", and Raft and API addresses (and the peer and Kafka
// addresses when given) that are host:port with a host a peer can dial
// (not empty, not an unspecified or multicast IP) and a port in 1..65535.
func validateJoin(req backend.JoinRequest) error {
	if err := validNodeID(req.ID); err != nil {
		return fmt.Errorf("%w: join: node id %q: %v", backend.ErrInvalidArgument, req.ID, err)
	}
	if err := validPeerAddress(req.RaftAddress); err != nil {
		return fmt.Errorf("%w: join %s: raft address %q: %v", backend.ErrInvalidArgument, req.ID, req.RaftAddress, err)
	}
	if err := validPeerAddress(req.APIAddress); err != nil {
		return fmt.Errorf("%w: join %s: API address %q: %v", backend.ErrInvalidArgument, req.ID, req.APIAddress, err)
	}
	for _, a := range []struct{ name, addr string }{{"peer", req.PeerAddress}, {"Kafka", req.KafkaAddress}} {
		if a.addr == "" {
			continue
		}
		if err := validPeerAddress(a.addr); err != nil {
			return fmt.Errorf("%w: join %s: %s address %q: %v", backend.ErrInvalidArgument, req.ID, a.name, a.addr, err)
		}
	}
	return nil
}

func validNodeID(id string) error {
	if id == "" || len(id) > maxNodeIDLen {
		return fmt.Errorf("want 1 to %d characters", maxNodeIDLen)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(".-_:@", c)) {
			return fmt.Errorf("character %q: want letters, digits and .-_:@", c)
		}
	}
	return nil
}

// validPeerAddress checks that addr is host:port a peer could dial.
func validPeerAddress(addr string) error {
	if addr == "" {
		return fmt.Errorf("required")
	}
	if len(addr) > maxAddressLen {
		return fmt.Errorf("longer than %d bytes", maxAddressLen)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("port %q: want 1 to 65535", port)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.IsUnspecified() || ip.IsMulticast() {
			return fmt.Errorf("%s is not an address a peer can dial", host)
		}
		return nil
	}
	return validHostname(host)
}

// validHostname checks a DNS name: dot-separated labels of letters, digits
// and hyphens, none empty or starting or ending with a hyphen.
func validHostname(host string) error {
	if host == "" || len(host) > 253 {
		return fmt.Errorf("host %q: want a name or an IP address", host)
	}
	for _, label := range strings.Split(strings.TrimSuffix(host, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("host %q: want a name or an IP address", host)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("host %q: want a name or an IP address", host)
			}
		}
	}
	return nil
}

// checkJoinCaller checks, under peer TLS, that the caller of a join is
// the node it asks to add: its connection presented a verified node
// certificate of req.ID, to this node or to the member that forwarded the
// call (a node that is not a member is not trusted to say what its caller
// presented). peer.ErrIdentity otherwise, before anything is asked or
// changed. Without peer TLS there is nothing to check.
func (n *Node) checkJoinCaller(req backend.JoinRequest) error {
	if n.cfg.PeerTLS == nil {
		return nil
	}
	if req.ForwardedBy != "" {
		m, err := n.member(req.ForwardedBy)
		if err != nil {
			return err
		}
		if m == nil {
			return fmt.Errorf("%w: join %s: forwarded by node %q, which is not a member", peer.ErrIdentity, req.ID, req.ForwardedBy)
		}
	}
	switch req.CallerNodeID {
	case req.ID:
		return nil
	case "":
		return fmt.Errorf("%w: join %s: the caller presented no node certificate", peer.ErrIdentity, req.ID)
	default:
		return fmt.Errorf("%w: join %s: the caller's certificate is node %q's", peer.ErrIdentity, req.ID, req.CallerNodeID)
	}
}

// checkJoiner checks that the node answers with the id it claims where
// nodes will call it (its peer address, else its API address) and that
// its Raft address accepts a connection (under peer TLS, one whose
// certificate is that node's: peer.ErrIdentity otherwise):
// backend.ErrNodeUnreachable otherwise.
func (n *Node) checkJoiner(ctx context.Context, req backend.JoinRequest, probe backend.NodeProbe) error {
	ctx, cancel := context.WithTimeout(ctx, joinProbeTimeout)
	defer cancel()
	addr := callAddress(req)
	rep, err := probe(ctx, addr)
	if err != nil {
		return fmt.Errorf("%w: node %s does not answer at %s: %v", backend.ErrNodeUnreachable, req.ID, addr, err)
	}
	if rep.ID != req.ID {
		return fmt.Errorf("%w: %s answers as node %q, not %q", backend.ErrNodeUnreachable, addr, rep.ID, req.ID)
	}
	presented, err := n.dialRaft(ctx, req.ID, req.RaftAddress)
	if err != nil {
		return fmt.Errorf("%w: node %s's raft address %s: %v", backend.ErrNodeUnreachable, req.ID, req.RaftAddress, err)
	}
	if (n.cfg.PeerTLS != nil || presented != "") && presented != req.ID {
		return fmt.Errorf("%w: join %s: its raft address %s proves to be node %q", peer.ErrIdentity, req.ID, req.RaftAddress, presented)
	}
	return nil
}

// dialRaft checks that peer id's Raft address answers a session's hello
// (transport.Port.CheckNode, on a connection it then closes), and returns
// the node id the peer proved: its certificate's under peer TLS, or the
// one the cluster secret proved ("" when neither did).
// It is the one place membership dials a Raft port. An in-memory node's
// transport has nothing to dial; Raft's own replication is its check.
func (n *Node) dialRaft(ctx context.Context, id, addr string) (string, error) {
	if n.cfg.InMemory {
		return "", nil
	}
	return n.stores.port.CheckNode(ctx, n.cfg.Peers.Raft(id, addr))
}

// raftLastLog sends the Raft server at addr a heartbeat of this leader's
// current term, the request Raft's own replication sends every few
// milliseconds (it changes no log), and returns the index of the last
// entry the server holds, from its answer. It is the leader's own view of
// a joining node's progress, from the address whose votes will count,
// beside what the node's client API says. It goes through this node's
// Raft transport, so it reaches the peer the way replication does.
func (n *Node) raftLastLog(id, addr string) (uint64, error) {
	return lastLogOf(n.stores.transport, n.raft.CurrentTerm(), n.cfg.NodeID, id, addr)
}

// lastLogOf asks node id at addr, over tr, for the index of its last Raft
// entry with a heartbeat of term from self (the leader of tr's group).
func lastLogOf(tr raft.Transport, term uint64, selfID, id, addr string) (uint64, error) {
	self := raft.ServerID(selfID)
	me := tr.EncodePeer(self, tr.LocalAddr())
	req := raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(self), Addr: me},
		Term:      term,
		// Leader is deprecated for RPCHeader.Addr, but a peer whose Raft
		// predates Addr reads only Leader; Raft's own heartbeat sets both,
		// and this is the same request.
		//lint:ignore SA1019 the same heartbeat Raft sends, for peers that read only Leader
		Leader: me,
	}
	var resp raft.AppendEntriesResponse
	if err := tr.AppendEntries(raft.ServerID(id), raft.ServerAddress(addr), &req, &resp); err != nil {
		return 0, err
	}
	if !resp.Success {
		return 0, fmt.Errorf("raft at %s refused a heartbeat of term %d (its term %d)", addr, term, resp.Term)
	}
	return resp.LastLog, nil
}

// waitCaughtUp asks the joining node, every joinPollInterval, how far it
// has applied, until it is ready, follows this leader in its current term,
// and has applied all but joinMaxLag of the leader's committed entries,
// and until its Raft address answers a heartbeat with a last entry as
// recent (raftLastLog). It fails when this node stops leading, when the
// node has not answered for joinSilence (backend.ErrNodeUnreachable), or when ctx
// ends (at the latest after joinCatchUpTimeout).
func (n *Node) waitCaughtUp(ctx context.Context, req backend.JoinRequest, probe backend.NodeProbe) error {
	ctx, cancel := context.WithTimeout(ctx, joinCatchUpTimeout)
	defer cancel()
	t := time.NewTicker(joinPollInterval)
	defer t.Stop()
	lastAnswer := time.Now()
	var last string
	for {
		if !n.IsLeader() {
			return backend.ErrNotLeader
		}
		commit, term := n.raft.CommitIndex(), n.raft.CurrentTerm()
		pctx, pcancel := context.WithTimeout(ctx, joinProbeTimeout)
		rep, err := probe(pctx, callAddress(req))
		pcancel()
		switch {
		case err != nil:
			last = err.Error()
		case rep.ID != req.ID:
			last = fmt.Sprintf("answers as node %q", rep.ID)
		default:
			lastAnswer = time.Now()
			if !rep.Ready || rep.LeaderID != n.cfg.NodeID || rep.Term != term || rep.AppliedIndex+joinMaxLag < commit {
				last = fmt.Sprintf("applied %d of %d (ready %v, leader %q, term %d of %d)", rep.AppliedIndex, commit, rep.Ready, rep.LeaderID, rep.Term, term)
				break
			}
			lastLog, err := n.raftLastLog(req.ID, req.RaftAddress)
			if err == nil && lastLog+joinMaxLag >= commit {
				return nil
			}
			last = fmt.Sprintf("its raft address holds %d of %d entries (%v)", lastLog, commit, err)
		}
		if time.Since(lastAnswer) > joinSilence {
			return fmt.Errorf("%w: node %s has not answered for %v (last: %s)", backend.ErrNodeUnreachable, req.ID, joinSilence, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for node %s to catch up: %w (last: %s)", req.ID, context.Cause(ctx), last)
		case <-t.C:
		}
	}
}
