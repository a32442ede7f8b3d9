package replication

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/auth/certid"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/internal/testcerts"
	"github.com/logd-dev/logd/peer"
	"github.com/logd-dev/logd/replication/catchup"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
	"github.com/logd-dev/logd/replication/transport"
)

// peerTLSFor is the peer TLS of a node that presents cert and trusts ca.
func peerTLSFor(ca *testcerts.CA, cert tls.Certificate) *peer.TLS {
	return &peer.TLS{Server: ca.ServerConfig(cert), Client: ca.ClientConfig(cert), NodeID: certid.NodeID}
}

// tlsJoin joins n through leader l as the Join handler would for a call
// that n made itself, over its own node certificate.
func tlsJoin(ctx context.Context, c *joinCluster, l, n *Node) error {
	req := joinRequest(n)
	req.CallerNodeID = n.cfg.NodeID
	return l.Join(ctx, req, c.probe)
}

// waitValues waits until n's partition 0 of topic holds want.
func waitValues(t *testing.T, ctx context.Context, n *Node, topic string, want ...string) {
	t.Helper()
	waitCond(t, ctx, n.cfg.NodeID+" holds "+strings.Join(want, ","), func() bool {
		p, err := n.fsm.Partition(topic, 0)
		if err != nil || p.Log().EndOffset() < int64(len(want)) {
			return false
		}
		return slices.Equal(fsmtest.ReadAll(t, n.fsm, topic, 0), want)
	})
}

// TestPeerTLSCluster: three nodes whose Raft traffic runs under mutual
// TLS join, replicate and elect a new leader; a node joins only when the
// caller proved to be that node and its Raft port presents its
// certificate; and the Raft port refuses whoever is not a member: a
// spoofed RequestVote with the leadership-transfer flag, in a member's
// name, does not make the leader step down.
func TestPeerTLSCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ca, other := testcerts.NewCA(t, "cluster"), testcerts.NewCA(t, "other")
	c := newJoinCluster(t)
	certOf := map[string]*testcerts.CA{"n5": other}
	c.configure = func(id string, cfg *Config) {
		issuer := ca
		if certOf[id] != nil {
			issuer = certOf[id]
		}
		cfg.PeerTLS = peerTLSFor(issuer, issuer.Node(t, id))
	}
	l := c.open(ctx, "n1", true)
	n2, n3 := c.open(ctx, "n2", false), c.open(ctx, "n3", false)
	if err := tlsJoin(ctx, c, l, n2); err != nil {
		t.Fatalf("join n2: %v", err)
	}
	// n3's call reaches the leader forwarded by n2.
	req := joinRequest(n3)
	req.CallerNodeID, req.ForwardedBy = "n3", "n2"
	if err := l.Join(ctx, req, c.probe); err != nil {
		t.Fatalf("join n3 forwarded by n2: %v", err)
	}

	t.Run("replicates and elects", func(t *testing.T) {
		if _, err := NewBackend(l).createTopic(ctx, fsm.CreateTopic{Name: "t", Partitions: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := NewBackend(l).appendCommand(ctx, fsm.Append{Topic: "t", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, "a", "b")}}}); err != nil {
			t.Fatal(err)
		}
		for _, n := range []*Node{n2, n3} {
			waitValues(t, ctx, n, "t", "a", "b")
		}
		if err := l.TransferLeadership(ctx, "n3"); err != nil {
			t.Fatalf("transfer the leadership to n3: %v", err)
		}
		waitCond(t, ctx, "n3 leads", func() bool { return n3.IsLeader() && n3.Ready() })
		if _, err := NewBackend(n3).appendCommand(ctx, fsm.Append{Topic: "t", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, "c")}}}); err != nil {
			t.Fatal(err)
		}
		for _, n := range []*Node{l, n2} {
			waitValues(t, ctx, n, "t", "a", "b", "c")
		}
		for _, n := range []*Node{l, n2, n3} {
			if st := n.RaftConnStats(); st.Admitted == 0 || st.Open == 0 {
				t.Errorf("%s's raft port: %+v, want admitted connections", n.cfg.NodeID, st)
			}
		}
		if err := n3.TransferLeadership(ctx, "n1"); err != nil {
			t.Fatalf("transfer the leadership back to n1: %v", err)
		}
		waitCond(t, ctx, "n1 leads", func() bool { return l.IsLeader() && l.Ready() })
	})

	t.Run("join only as itself", func(t *testing.T) {
		n4, n6 := c.open(ctx, "n4", false), c.open(ctx, "n6", false)
		before := membership(t, l)
		for _, tc := range []struct {
			name string
			edit func(*backend.JoinRequest)
			want error
		}{
			{name: "no node certificate", edit: func(r *backend.JoinRequest) { r.CallerNodeID = "" }, want: peer.ErrIdentity},
			{name: "another node's certificate", edit: func(r *backend.JoinRequest) { r.CallerNodeID = "n2" }, want: peer.ErrIdentity},
			{name: "forwarded by a non-member", edit: func(r *backend.JoinRequest) { r.ForwardedBy = "n9" }, want: peer.ErrIdentity},
			{name: "its raft address is another node's", edit: func(r *backend.JoinRequest) { r.RaftAddress = string(n6.stores.transport.LocalAddr()) }, want: peer.ErrIdentity},
		} {
			req := joinRequest(n4)
			req.CallerNodeID = "n4"
			tc.edit(&req)
			if err := l.Join(ctx, req, c.probe); !errors.Is(err, tc.want) {
				t.Errorf("%s: join: %v, want %v", tc.name, err, tc.want)
			}
			if after := membership(t, l); after != before {
				t.Errorf("%s: membership %s, was %s", tc.name, after, before)
			}
		}
		// A node whose certificate another CA signed: the leader's dial
		// to its Raft port does not trust it.
		n5 := c.open(ctx, "n5", false)
		if err := tlsJoin(ctx, c, l, n5); !errors.Is(err, backend.ErrNodeUnreachable) {
			t.Errorf("join of a node of another CA: %v, want backend.ErrNodeUnreachable", err)
		}
		if after := membership(t, l); after != before {
			t.Errorf("membership %s after refused joins, was %s", after, before)
		}
	})

	t.Run("raft port refuses strangers", func(t *testing.T) {
		leaderAddr := string(l.stores.transport.LocalAddr())
		for _, tc := range []struct {
			name    string
			cert    *tls.Certificate // nil: plaintext
			refused func(backend.RaftConnStats) uint64
		}{
			{name: "plaintext", refused: func(s backend.RaftConnStats) uint64 { return s.RefusedHandshake }},
			{name: "a node certificate of another CA", cert: ptr(other.Node(t, "n2")), refused: func(s backend.RaftConnStats) uint64 { return s.RefusedHandshake }},
			{name: "a client certificate of the cluster CA", cert: ptr(ca.Client(t, "mallory")), refused: func(s backend.RaftConnStats) uint64 { return s.RefusedNotNode }},
			{name: "a node certificate of a non-member", cert: ptr(ca.Node(t, "n9")), refused: func(s backend.RaftConnStats) uint64 { return s.RefusedNotMember }},
			// Raft's own framing proves no cluster secret: refused
			// whatever the certificate.
			{name: "a member's certificate without the secret", cert: ptr(ca.Node(t, "n2")), refused: func(s backend.RaftConnStats) uint64 { return s.RefusedSecret }},
		} {
			before := tc.refused(l.RaftConnStats())
			term := l.raft.CurrentTerm()
			err := spoofVote(t, tc.cert, leaderAddr, n2, term+10)
			if err == nil {
				t.Errorf("%s: a RequestVote in n2's name was answered", tc.name)
			}
			// An election of its own would raise the term by one or
			// two; the spoofed vote would have set it to term+10, and
			// made n1 a follower, before it answered.
			if got := l.raft.CurrentTerm(); got >= term+10 || !l.IsLeader() {
				t.Errorf("%s: after a spoofed vote n1 is in term %d (was %d), leader %v", tc.name, got, term, l.IsLeader())
			}
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			waitCond(t, cctx, tc.name+": refusal counted", func() bool { return tc.refused(l.RaftConnStats()) > before })
			ccancel()
		}
	})

	t.Run("a removed node's connections are closed", func(t *testing.T) {
		// A connection in n3's name that Raft answers: admitted while n3
		// is a member.
		c := raftConnAs(t, ca, "n3", ca.Node(t, "n3"), l.clusterSecretKey(), string(l.stores.transport.LocalAddr()))
		if err := l.RemoveNode(ctx, "n3"); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		var err error
		for err == nil {
			_, err = c.Read(make([]byte, 64))
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Error("n1 keeps the connection of a removed node open")
		}
	})
}

// raftConnAs opens a session to the Raft port at addr over TLS with
// cert, node id's, proving secret, sends an AppendEntries of a past term
// over it in id's name (Raft answers, and changes nothing) and returns
// the stream it went over, which the test's end closes.
func raftConnAs(t *testing.T, ca *testcerts.CA, id string, cert tls.Certificate, secret []byte, addr string) net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := transport.NewPort(ln, nil, peerTLSFor(ca, cert), id, 16, fsmtest.Logger())
	port.SetSecret(secret, true)
	port.Start()
	d := &recordingLayer{Layer: port.Group(0)}
	tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: d, MaxPool: 1, Timeout: 5 * time.Second, Logger: hclog.NewNullLogger()})
	t.Cleanup(func() { tr.Close(); tr.CloseStreams(); port.Close() })
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: tr.EncodePeer(raft.ServerID(id), tr.LocalAddr())},
		Term:      0,
	}
	var resp raft.AppendEntriesResponse
	if err := tr.AppendEntries("n1", raft.ServerAddress(addr), req, &resp); err != nil {
		t.Fatalf("an AppendEntries in %s's name: %v", id, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.dialed) != 1 {
		t.Fatalf("%d connections dialed, want 1", len(d.dialed))
	}
	return d.dialed[0]
}

// recordingLayer is a group's layer that keeps the connections it dialed.
type recordingLayer struct {
	*transport.Layer
	mu     sync.Mutex
	dialed []net.Conn // guarded by mu
}

func (d *recordingLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := d.Layer.Dial(addr, timeout)
	if err == nil {
		d.mu.Lock()
		d.dialed = append(d.dialed, c)
		d.mu.Unlock()
	}
	return c, err
}

func ptr[T any](v T) *T { return &v }

// presenting is a GetClientCertificate that presents cert whatever CAs
// the server names (by default, Go's client sends no certificate that
// none of them issued).
func presenting(cert tls.Certificate) func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
}

// spoofVote sends the Raft server at addr a RequestVote of term in the
// name of member n, with the leadership-transfer flag (which makes a
// leader grant a vote, and step down for its term), through hashicorp/raft's
// own transport dialing with cert (plaintext when nil), and returns the
// transport's error.
func spoofVote(t *testing.T, cert *tls.Certificate, addr string, n *Node, term uint64) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &spoofDialer{Listener: ln}
	if cert != nil {
		// The stranger trusts any server: only its own certificate is
		// under test, and it presents it whatever CAs the server names.
		d.cfg = &tls.Config{GetClientCertificate: presenting(*cert), InsecureSkipVerify: true}
	}
	tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: d, MaxPool: 1, Timeout: 2 * time.Second, Logger: hclog.NewNullLogger()})
	defer tr.Close()
	claimed := n.stores.transport.LocalAddr()
	req := &raft.RequestVoteRequest{
		RPCHeader:          raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(n.cfg.NodeID), Addr: tr.EncodePeer(raft.ServerID(n.cfg.NodeID), claimed)},
		Term:               term,
		LastLogIndex:       n.raft.LastIndex() + 1000,
		LastLogTerm:        term,
		LeadershipTransfer: true,
	}
	var resp raft.RequestVoteResponse
	return tr.RequestVote("n1", raft.ServerAddress(addr), req, &resp)
}

// spoofDialer is a stranger's raft.StreamLayer: it dials over TLS with cfg,
// or plaintext when cfg is nil, and keeps the connections it dialed.
type spoofDialer struct {
	net.Listener
	cfg *tls.Config

	mu     sync.Mutex
	dialed []net.Conn // guarded by mu
}

func (d *spoofDialer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	nd := &net.Dialer{Timeout: timeout}
	var c net.Conn
	var err error
	if d.cfg == nil {
		c, err = nd.Dial("tcp", string(addr))
	} else {
		c, err = tls.DialWithDialer(nd, "tcp", string(addr), d.cfg)
	}
	if err == nil {
		d.mu.Lock()
		d.dialed = append(d.dialed, c)
		d.mu.Unlock()
	}
	return c, err
}

// TestSegmentsServedToNodesOnly: under peer TLS, the segment endpoint
// serves a node of the cluster, over which a snapshot's catch-up
// completes, and refuses with 403 a caller without a certificate or with a
// client certificate that is not a node's; a node of another CA does not
// get past the handshake.
func TestSegmentsServedToNodesOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ca, other := testcerts.NewCA(t, "cluster"), testcerts.NewCA(t, "other")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	cert := ca.Node(t, "n1")
	n, err := Open(Config{NodeID: "n1", DataDir: t.TempDir(), RaftBind: "127.0.0.1:0", Bootstrap: true, Logger: fsmtest.Logger(),
		RaftLogLevel: "error", Fatal: func(err error) { t.Errorf("fatal: %v", err) }, PeerTLS: peerTLSFor(ca, cert),
		CleanerInterval: time.Hour, SnapshotInterval: time.Hour, APIAdvertise: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	// The API port: clients without certificates are welcome there.
	srv := &http.Server{Handler: NewBackend(n).SegmentHandler(), TLSConfig: ca.OptionalClientConfig(cert),
		ErrorLog: stdlog.New(io.Discard, "", 0)}
	go srv.ServeTLS(ln, "", "")
	defer srv.Close()
	waitCond(t, ctx, "a registered leader", func() bool { _, ok := n.FSM().NodeAddress("n1"); return n.IsLeader() && ok })
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "t", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, "a", "b")}}}); err != nil {
		t.Fatal(err)
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	snap := fsmtest.Snapshot(t, n.FSM())
	tp, _ := n.FSM().Topic("t")
	p, _ := n.FSM().Partition("t", 0)
	seg := p.Log().Segments()[0]
	ref := catchup.SegmentRef{Topic: "t", TopicIndex: tp.CreateIndex, Partition: 0, Base: seg.BaseOffset, End: seg.EndOffset, Bytes: seg.Bytes}

	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		// want is "" for served, "403" for refused by the handler, and
		// "handshake" for refused before it
		want string
	}{
		{name: "a node of the cluster", cfg: ca.ClientConfig(ca.Node(t, "n2"))},
		{name: "no certificate", cfg: ca.ClientConfig(tls.Certificate{}), want: "403"},
		{name: "a client certificate of the cluster CA", cfg: ca.ClientConfig(ca.Client(t, "mallory")), want: "403"},
		{name: "a node of another CA", cfg: &tls.Config{RootCAs: ca.Pool, GetClientCertificate: presenting(other.Node(t, "n2"))}, want: "handshake"},
	} {
		_, err := catchup.NewSegmentClient(peer.HTTP{TLS: tc.cfg}).SegmentMeta(ctx, addr, ref)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want the segment", tc.name, err)
		case tc.want == "403" && (err == nil || !strings.Contains(err.Error(), "403 Forbidden")):
			t.Errorf("%s: %v, want 403", tc.name, err)
		case tc.want == "handshake" && (err == nil || strings.Contains(err.Error(), "403 Forbidden")):
			t.Errorf("%s: %v, want a failed handshake", tc.name, err)
		}
	}
	// A follower catches up from the snapshot over TLS.
	client := catchup.NewSegmentClient(peer.HTTP{TLS: ca.ClientConfig(ca.Node(t, "n2"))})
	f, _ := fsmtest.New(t, t.TempDir(), catchup.NewSegmentFetcher(client, catchup.FetcherOptions{Timeout: time.Minute, Logger: fsmtest.Logger()}))
	if err := f.Restore(io.NopCloser(strings.NewReader(string(snap)))); err != nil {
		t.Fatalf("restore over TLS: %v", err)
	}
	if got := fsmtest.ReadAll(t, f, "t", 0); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("follower reads %v", got)
	}
}

// TestPeerTLSConfigValidate: a peer TLS configuration that could not
// authenticate both sides (peer.TLS.Validate; its cases are peer's
// TestTLSValidate), or that a node could not use, is refused before
// anything opens.
func TestPeerTLSConfigValidate(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	cert := ca.Node(t, "n1")
	for _, tc := range []struct {
		name string
		edit func(*Config)
		ok   bool
	}{
		{name: "complete", ok: true},
		{name: "no NodeID", edit: func(c *Config) { c.PeerTLS.NodeID = nil }},
		{name: "client verifies no server", edit: func(c *Config) { c.PeerTLS.Client.InsecureSkipVerify = true }},
		{name: "in memory", edit: func(c *Config) { c.InMemory = true }},
		{name: "negative connection cap", edit: func(c *Config) { c.MaxRaftConns = -1 }},
	} {
		cfg := Config{NodeID: "n1", DataDir: t.TempDir(), RaftBind: "127.0.0.1:0", PeerTLS: peerTLSFor(ca, cert)}
		if tc.edit != nil {
			tc.edit(&cfg)
		}
		if err := cfg.Validate(); (err == nil) != tc.ok || err != nil && !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
