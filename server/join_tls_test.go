package server_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/auth/certid"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/internal/testcerts"
	"github.com/logd-dev/logd/peer"
	"github.com/logd-dev/logd/server"
)

// joinBackend is a node as Join and forwarding see it: a leader records
// the join requests it gets; a follower knows the leader's address.
type joinBackend struct {
	backend.API

	id, leaderAddr string

	mu   sync.Mutex
	last *backend.JoinRequest
}

func (b *joinBackend) NodeID() string               { return b.id }
func (b *joinBackend) APIAddress() string           { return b.id + ":1" }
func (b *joinBackend) Failed() error                { return nil }
func (b *joinBackend) MemberAPIAddresses() []string { return nil }
func (b *joinBackend) Ready() bool                  { return true }
func (b *joinBackend) AppliedIndex() uint64         { return 0 }

// Status names the members: the leader n1 and the follower n2.
func (b *joinBackend) Status() backend.Status {
	return backend.Status{NodeID: b.id, Members: []backend.Member{{ID: "n1"}, {ID: "n2"}}}
}
func (b *joinBackend) IsLeader() bool { return b.leaderAddr == "" }

func (b *joinBackend) LeaderAPIAddress() (string, string) {
	if b.leaderAddr == "" {
		return b.APIAddress(), b.id
	}
	return b.leaderAddr, "n1"
}

func (b *joinBackend) LeaderCallAddress() (string, string) { return b.LeaderAPIAddress() }

func (b *joinBackend) Join(_ context.Context, req backend.JoinRequest, _ backend.NodeProbe) error {
	if !b.IsLeader() {
		return backend.ErrNotLeader
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last = &req
	return nil
}

func (b *joinBackend) take() *backend.JoinRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.last
	b.last = nil
	return r
}

// serveNode serves a node's API over TLS with its node certificate,
// verifying the client certificates of ca that callers present, and
// returns its address.
func serveNode(t *testing.T, ca *testcerts.CA, cert tls.Certificate, h http.Handler) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = ca.OptionalClientConfig(cert)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "https://")
}

// TestJoinCallerUnderPeerTLS: under peer TLS, Join names the node behind
// its caller's certificate, also when a follower forwarded the call to
// the leader (over TLS, with its own node certificate), and never believes
// forwarding headers from a caller that is not a node.
func TestJoinCallerUnderPeerTLS(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	peerTLS := func(id string) *peer.TLS {
		cert := ca.Node(t, id)
		return &peer.TLS{Server: ca.ServerConfig(cert), Client: ca.ClientConfig(cert), NodeID: certid.NodeID}
	}
	leader := &joinBackend{id: "n1"}
	leaderAddr := serveNode(t, ca, ca.Node(t, "n1"), server.New(server.Options{Backend: leader, PeerTLS: peerTLS("n1")}).Handler())
	follower := &joinBackend{id: "n2", leaderAddr: leaderAddr}
	followerAddr := serveNode(t, ca, ca.Node(t, "n2"), server.New(server.Options{Backend: follower, PeerTLS: peerTLS("n2")}).Handler())

	forged := http.Header{server.ForwardedHeader: {"n2"}, server.ForwardedNodeHeader: {"n4"}}
	for _, tc := range []struct {
		name   string
		to     string
		cert   tls.Certificate
		header http.Header
		// caller and by are the CallerNodeID and ForwardedBy the leader's
		// backend gets.
		caller, by string
	}{
		{name: "the node itself, to the leader", to: leaderAddr, cert: ca.Node(t, "n4"), caller: "n4"},
		{name: "the node itself, through a follower", to: followerAddr, cert: ca.Node(t, "n4"), caller: "n4", by: "n2"},
		{name: "a client certificate, through a follower", to: followerAddr, cert: ca.Client(t, "mallory"),
			header: http.Header{server.ForwardedNodeHeader: {"n4"}}, by: "n2"},
		{name: "no certificate, forged forwarding headers", to: leaderAddr, header: forged},
		{name: "a client certificate, forged forwarding headers", to: leaderAddr, cert: ca.Client(t, "mallory"), header: forged},
		// The backend refuses it unless n5 is a member.
		{name: "another node, forged forwarding headers", to: leaderAddr, cert: ca.Node(t, "n5"), header: forged, caller: "n4", by: "n5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			tr := peer.HTTP{TLS: ca.ClientConfig(tc.cert)}.Transport(2*time.Second, false)
			defer tr.CloseIdleConnections()
			c := logdv1connect.NewLogServiceClient(&http.Client{Transport: tr}, "https://"+tc.to)
			req := connect.NewRequest(&logdv1.JoinRequest{NodeId: "n4", RaftAddress: "127.0.0.1:1", ApiAddress: "127.0.0.1:2"})
			for k, v := range tc.header {
				req.Header()[k] = v
			}
			if _, err := c.Join(ctx, req); err != nil {
				t.Fatalf("join: %v", err)
			}
			got := leader.take()
			if got == nil {
				t.Fatal("the leader's backend got no join")
			}
			if got.CallerNodeID != tc.caller || got.ForwardedBy != tc.by {
				t.Errorf("caller %q forwarded by %q, want %q by %q", got.CallerNodeID, got.ForwardedBy, tc.caller, tc.by)
			}
		})
	}
}
