package replication

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/auth/certid"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/internal/testcerts"
	"github.com/logd-dev/logd/replication/catchup"
	"github.com/logd-dev/logd/replication/fsm"
)

// peerTLSFor is the peer TLS of a node that presents cert and trusts ca.
func peerTLSFor(ca *testcerts.CA, cert tls.Certificate) *PeerTLS {
	return &PeerTLS{Server: ca.ServerConfig(cert), Client: ca.ClientConfig(cert), NodeID: certid.NodeID}
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
		return slices.Equal(readAll(t, n.fsm, topic, 0), want)
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
		if _, err := l.CreateTopic(ctx, fsm.CreateTopic{Name: "t", Partitions: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(ctx, fsm.Append{Topic: "t", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, "a", "b")}}}); err != nil {
			t.Fatal(err)
		}
		for _, n := range []*Node{n2, n3} {
			waitValues(t, ctx, n, "t", "a", "b")
		}
		if err := l.TransferLeadership(ctx, "n3"); err != nil {
			t.Fatalf("transfer the leadership to n3: %v", err)
		}
		waitCond(t, ctx, "n3 leads", func() bool { return n3.IsLeader() && n3.Ready() })
		if _, err := n3.Append(ctx, fsm.Append{Topic: "t", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, "c")}}}); err != nil {
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
			{name: "no node certificate", edit: func(r *backend.JoinRequest) { r.CallerNodeID = "" }, want: ErrPeerIdentity},
			{name: "another node's certificate", edit: func(r *backend.JoinRequest) { r.CallerNodeID = "n2" }, want: ErrPeerIdentity},
			{name: "forwarded by a non-member", edit: func(r *backend.JoinRequest) { r.ForwardedBy = "n9" }, want: ErrPeerIdentity},
			{name: "its raft address is another node's", edit: func(r *backend.JoinRequest) { r.RaftAddress = string(n6.stores.transport.LocalAddr()) }, want: ErrPeerIdentity},
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
		// n3 led for a while: n1 holds connections it opened then.
		if admittedFrom(l, "n3") == 0 {
			t.Fatal("n1 holds no connection from n3")
		}
		if err := l.RemoveNode(ctx, "n3"); err != nil {
			t.Fatal(err)
		}
		waitCond(t, ctx, "n1 closes n3's connections", func() bool { return admittedFrom(l, "n3") == 0 })
	})
}

// admittedFrom counts the connections n's Raft port admitted from node
// id that are open.
func admittedFrom(n *Node, id string) int {
	s := n.stores.stream
	s.mu.Lock()
	defer s.mu.Unlock()
	k := 0
	for _, from := range s.open {
		if from == id {
			k++
		}
	}
	return k
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
// or plaintext when cfg is nil.
type spoofDialer struct {
	net.Listener
	cfg *tls.Config
}

func (d *spoofDialer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	nd := &net.Dialer{Timeout: timeout}
	if d.cfg == nil {
		return nd.Dial("tcp", string(addr))
	}
	return tls.DialWithDialer(nd, "tcp", string(addr), d.cfg)
}

// TestRaftStreamCap: the Raft port holds at most its cap of connections,
// with or without TLS, and closes more at once; under TLS, strangers that
// never finish their handshake hold a slot only until its deadline, and
// do not hold up a member's connection meanwhile.
func TestRaftStreamCap(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	for _, tc := range []struct {
		name string
		tls  bool
	}{{name: "plaintext"}, {name: "tls", tls: true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var ptls *PeerTLS
			if tc.tls {
				ptls = peerTLSFor(ca, ca.Node(t, "n1"))
			}
			const max = 3
			s := newRaftStream(ln, nil, ptls, max, testLogger())
			s.handshake = 500 * time.Millisecond
			s.attach(func(string) bool { return true })
			s.start()
			defer s.Close()
			admitted := make(chan net.Conn, 16)
			go func() {
				for {
					c, err := s.Accept()
					if err != nil {
						return
					}
					admitted <- c
				}
			}()
			addr := ln.Addr().String()
			dialRaw := func() net.Conn {
				t.Helper()
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return c
			}
			open := func(n int) func() bool { return func() bool { return s.stats().Open == n } }
			// closedByPeer waits until the server closed c.
			closedByPeer := func(what string, c net.Conn) {
				t.Helper()
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
					t.Fatalf("%s: read %v, want the connection closed", what, err)
				}
			}

			if !tc.tls {
				for range max {
					dialRaw()
				}
				waitCond(t, ctx, "three admitted", open(max))
				closedByPeer("a fourth connection", dialRaw())
				if st := s.stats(); st.RefusedCap != 1 || st.Admitted != max {
					t.Fatalf("stats %+v: want 1 refused by the cap, %d admitted", st, max)
				}
				// One closes: a new one takes its place.
				(<-admitted).Close()
				waitCond(t, ctx, "a slot free", open(max-1))
				dialRaw()
				waitCond(t, ctx, "the new one admitted", func() bool { return s.stats().Admitted == max+1 })
				return
			}
			// Two strangers stall in their handshakes.
			s1, s2 := dialRaw(), dialRaw()
			waitCond(t, ctx, "two in their handshake", open(2))
			// A member still gets in.
			c, _, err := peerTLSFor(ca, ca.Node(t, "n2")).handshake(ctx, dialRaw(), addr)
			if err != nil {
				t.Fatalf("member's handshake while strangers stall: %v", err)
			}
			defer c.Close()
			select {
			case <-admitted:
			case <-ctx.Done():
				t.Fatal("the member's connection was not admitted while strangers stalled")
			}
			closedByPeer("a fourth connection", dialRaw())
			closedByPeer("a stalled stranger", s1)
			closedByPeer("a stalled stranger", s2)
			waitCond(t, ctx, "the strangers' slots freed", open(1))
			// A slot is freed before its refusal is counted: wait for the count.
			waitCond(t, ctx, "2 refused by their handshake", func() bool { return s.stats().RefusedHandshake == 2 })
			if st := s.stats(); st.RefusedCap != 1 || st.RefusedHandshake != 2 || st.Admitted != 1 {
				t.Fatalf("stats %+v: want 1 refused by the cap, 2 by their handshake, 1 admitted", st)
			}
		})
	}
}

// isReset reports whether err is a connection reset by the peer, which a
// read may see instead of EOF when the server closed with unread data.
func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
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
	n, err := Open(Config{NodeID: "n1", DataDir: t.TempDir(), RaftBind: "127.0.0.1:0", Bootstrap: true, Logger: testLogger(),
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
	if _, err := n.CreateTopic(ctx, fsm.CreateTopic{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Append(ctx, fsm.Append{Topic: "t", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, "a", "b")}}}); err != nil {
		t.Fatal(err)
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	snap := snapshotBytes(t, n.FSM())
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
		_, err := catchup.NewSegmentClient(PeerHTTP{TLS: tc.cfg}).SegmentMeta(ctx, addr, ref)
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
	client := catchup.NewSegmentClient(PeerHTTP{TLS: ca.ClientConfig(ca.Node(t, "n2"))})
	f, _ := testFSM(t, t.TempDir(), catchup.NewSegmentFetcher(client, time.Minute, testLogger()))
	if err := f.Restore(io.NopCloser(strings.NewReader(string(snap)))); err != nil {
		t.Fatalf("restore over TLS: %v", err)
	}
	if got := readAll(t, f, "t", 0); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("follower reads %v", got)
	}
}

// TestPeerTLSConfigValidate: a peer TLS configuration that could not
// authenticate both sides is refused before anything opens.
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
		{name: "no client configuration", edit: func(c *Config) { c.PeerTLS.Client = nil }},
		{name: "server without a certificate", edit: func(c *Config) { c.PeerTLS.Server.Certificates = nil }},
		{name: "client without a certificate", edit: func(c *Config) { c.PeerTLS.Client.Certificates = nil }},
		{name: "server verifies no client", edit: func(c *Config) { c.PeerTLS.Server.ClientAuth = tls.RequestClientCert }},
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
