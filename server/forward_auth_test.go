package server_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/internal/testcerts"
	"github.com/logd-dev/logd/server"
)

// TestForwardedPrincipalTrust: a leader takes the principal a forwarding
// node names only from a connection with a verified node certificate of a
// member; from anyone else the header is dropped. (The test's one node, n1,
// stands for the forwarding member.)
func TestForwardedPrincipalTrust(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ca := testcerts.NewCA(t, "cluster")
	e := newAuthEnv(t, ctx, envConfig{ca: ca})
	e.grant(ctx, allow("User:alice", auth.ResourceTopic, auth.PatternLiteral, "a1", auth.OpCreate))
	n1, n2, bob := ca.Node(t, "n1"), ca.Node(t, "n2"), ca.Client(t, "bob")
	fwd := func(principal string) http.Header {
		return http.Header{server.ForwardedHeader: {"n1"}, server.ForwardedPrincipalHeader: {principal}, server.ForwardedForHeader: {"10.1.2.3:4567"}}
	}
	for _, tc := range []struct {
		name   string
		cert   *tls.Certificate
		header http.Header
		want   string // "" wants UNAUTHENTICATED
	}{
		{name: "from a member", cert: &n1, header: fwd("certificate User:alice"), want: "User:alice certificate"},
		{name: "bootstrap principal from a member", cert: &n1, header: fwd("bootstrap-token User:admin"), want: "User:admin bootstrap-token superuser"},
		{name: "from a node that is no member: ignored", cert: &n2, header: fwd("bootstrap-token User:admin"), want: "Node:n2 certificate"},
		{name: "from a user certificate: ignored", cert: &bob, header: fwd("certificate User:alice"), want: "User:bob certificate"},
		{name: "without a certificate: ignored", header: fwd("bootstrap-token User:admin")},
		{name: "from a member, not forwarded: ignored", cert: &n1,
			header: http.Header{server.ForwardedPrincipalHeader: {"certificate User:alice"}}, want: "Node:n1 certificate"},
		{name: "a token method is not forwarded by header", cert: &n1, header: fwd("token User:alice")},
		{name: "malformed", cert: &n1, header: fwd("certificate")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := whoami(ctx, e.tlsClient(tc.cert, "", tc.header))
			switch {
			case tc.want == "" && connect.CodeOf(err) != connect.CodeUnauthenticated:
				t.Errorf("got %q, %v; want UNAUTHENTICATED", got, err)
			case tc.want != "" && (err != nil || got != tc.want):
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	// A certificate of the client CA that claims to be node n1 is no node:
	// it neither vouches for a forwarded principal nor names Node:n1.
	clientCA := testcerts.NewCA(t, "clients")
	e2 := newAuthEnv(t, ctx, envConfig{ca: ca, clientCA: clientCA})
	fake := clientCA.Node(t, "n1")
	if got, err := whoami(ctx, e2.tlsClient(&fake, "", fwd("bootstrap-token User:admin"))); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("a client-CA certificate posing as member n1: %q, %v; want UNAUTHENTICATED", got, err)
	}
	if got, err := whoami(ctx, e2.tlsClient(&fake, "", nil)); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("a client-CA certificate with a node URI: %q, %v; want UNAUTHENTICATED", got, err)
	}
	carol := clientCA.Client(t, "carol")
	if got, err := whoami(ctx, e2.tlsClient(&carol, "", nil)); err != nil || got != "User:carol certificate" {
		t.Errorf("a client of the client CA: %q, %v", got, err)
	}
	// The audit log names the client's address and the forwarding node.
	e.auditLines()
	c := e.tlsClient(&n1, "", fwd("certificate User:alice"))
	if _, err := c.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "a1", Partitions: 1})); err != nil {
		t.Fatal(err)
	}
	lines := e.auditLines()
	if len(lines) != 1 || lines[0]["principal"] != "User:alice" || lines[0]["remote"] != "10.1.2.3:4567" || lines[0]["forwarded_by"] != "n1" {
		t.Errorf("audit %v", lines)
	}
	// A node joins as itself, not as another.
	n9, n8 := ca.Node(t, "n9"), ca.Node(t, "n8")
	join := &logdv1.JoinRequest{NodeId: "n9", RaftAddress: "127.0.0.1:1", ApiAddress: "127.0.0.1:1"}
	if _, err := e.tlsClient(&n9, "", nil).Join(ctx, connect.NewRequest(join)); connect.CodeOf(err) == connect.CodePermissionDenied || err == nil {
		t.Errorf("n9 joining as itself: %v, want the join's own error (the address is unreachable)", err)
	}
	if _, err := e.tlsClient(&n8, "", nil).Join(ctx, connect.NewRequest(join)); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("n8 joining as n9: %v, want PERMISSION_DENIED", err)
	}
}

// followerBackend is a follower that knows its leader and keeps tokens
// and ACLs; calls outside forwarding panic (the embedded nil Backend).
type followerBackend struct {
	backend.ClusterAPI
	backend.TopicAPI
	backend.RecordAPI
	backend.GroupAPI
	backend.QueueAPI
	backend.RedriveAPI
	backend.StatsAPI
	*memSecurity
	leader string
}

func (b *followerBackend) NodeID() string                     { return "f1" }
func (b *followerBackend) APIAddress() string                 { return "self:1" }
func (b *followerBackend) Failed() error                      { return nil }
func (b *followerBackend) Ready() bool                        { return true }
func (b *followerBackend) IsLeader() bool                     { return false }
func (b *followerBackend) MemberAPIAddresses() []string       { return nil }
func (b *followerBackend) LeaderAPIAddress() (string, string) { return b.leader, "l1" }

// LeaderCallAddress: the leader registered no peer address.
func (b *followerBackend) LeaderCallAddress() (string, string) { return b.leader, "l1" }

// recordingLeader answers Produce and keeps the headers of each call.
type recordingLeader struct {
	logdv1connect.UnimplementedLogServiceHandler
	mu      sync.Mutex
	headers []http.Header
}

func (l *recordingLeader) Produce(_ context.Context, req *connect.Request[logdv1.ProduceRequest]) (*connect.Response[logdv1.ProduceResponse], error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.headers = append(l.headers, req.Header().Clone())
	return connect.NewResponse(&logdv1.ProduceResponse{}), nil
}

// take returns the headers recorded since the last call.
func (l *recordingLeader) take() []http.Header {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.headers
	l.headers = nil
	return h
}

// TestFollowerAuthorizesForwardedWrites: a follower checks a write before
// forwarding it (a refused one never reaches the leader), and sends the
// leader the principal: a token as it came, a certificate's or the
// bootstrap token's principal in the forwarding header, never one the
// client set.
func TestFollowerAuthorizesForwardedWrites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leader := &recordingLeader{}
	_, lh := logdv1connect.NewLogServiceHandler(leader)
	ls := httptest.NewUnstartedServer(lh)
	ls.Config.Protocols = new(http.Protocols)
	ls.Config.Protocols.SetHTTP1(true)
	ls.Config.Protocols.SetUnencryptedHTTP2(true)
	ls.Start()
	t.Cleanup(ls.Close)

	ca := testcerts.NewCA(t, "cluster")
	sec := newMemSecurity()
	boot, err := auth.NewToken(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b := &followerBackend{memSecurity: sec, leader: strings.TrimPrefix(ls.URL, "http://")}
	fs := httptest.NewUnstartedServer(server.New(server.Options{Backend: b, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Auth: server.AuthOptions{Required: true, BootstrapToken: &boot}}).Handler())
	fs.EnableHTTP2 = true
	fs.TLS = ca.OptionalClientConfig(ca.Node(t, "f1"))
	fs.Config.ErrorLog = log.New(io.Discard, "", 0)
	fs.StartTLS()
	t.Cleanup(fs.Close)
	e := &authEnv{t: t, url: fs.URL, hs: fs, ca: ca}

	writeT := func(p string) auth.ACL { return allow(p, auth.ResourceTopic, auth.PatternLiteral, "t", auth.OpWrite) }
	alice := addUser(t, ctx, sec, "alice", writeT("User:alice"))
	bob := addUser(t, ctx, sec, "bob")
	if _, err := sec.CreateACLs(ctx, []auth.ACL{writeT("User:carol")}); err != nil {
		t.Fatal(err)
	}
	carol := ca.Client(t, "carol")
	produce := &logdv1.ProduceRequest{Topic: "t", Records: []*logdv1.Record{{Value: []byte(strings.Repeat("v", 2000))}}}
	spoof := http.Header{server.ForwardedPrincipalHeader: {"bootstrap-token User:admin"}, server.ForwardedForHeader: {"1.2.3.4:5"}}
	for _, tc := range []struct {
		name   string
		cert   *tls.Certificate
		token  string
		header http.Header
		opts   []connect.ClientOption
		// principal is the forwarded principal header the leader must
		// see; denied wants PERMISSION_DENIED and nothing forwarded.
		principal string
		denied    bool
	}{
		{name: "token", token: alice},
		{name: "token, gzip", token: alice, opts: []connect.ClientOption{connect.WithSendGzip()}},
		{name: "token, gRPC", token: alice, opts: []connect.ClientOption{connect.WithGRPC()}},
		{name: "token without the permission", token: bob, denied: true},
		{name: "token without the permission, gRPC", token: bob, denied: true, opts: []connect.ClientOption{connect.WithGRPC()}},
		{name: "certificate", cert: &carol, principal: "certificate User:carol"},
		{name: "bootstrap token", token: boot.String(), principal: "bootstrap-token User:admin"},
		{name: "client-set forwarding headers are dropped", token: alice, header: spoof},
		{name: "client-set forwarding headers do not help", token: bob, header: spoof, denied: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cert tls.Certificate
			if tc.cert != nil {
				cert = *tc.cert
			}
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.ClientConfig(cert), ForceAttemptHTTP2: true}}
			defer hc.CloseIdleConnections()
			c := logdv1connect.NewLogServiceClient(hc, e.url, append(tc.opts, connect.WithInterceptors(bearer(tc.token), withHeader(tc.header)))...)
			_, err := c.Produce(ctx, connect.NewRequest(produce))
			got := leader.take()
			if tc.denied {
				info := errorInfo(err)
				if connect.CodeOf(err) != connect.CodePermissionDenied || info.GetPermission() != "write topic t" || len(got) != 0 {
					t.Errorf("%v (%v), %d forwarded; want PERMISSION_DENIED for write topic t, none forwarded", err, info, len(got))
				}
				return
			}
			if err != nil || len(got) != 1 {
				t.Fatalf("%v, %d forwarded; want one forwarded", err, len(got))
			}
			h := got[0]
			if h.Get(server.ForwardedHeader) != "f1" || h.Get(server.ForwardedPrincipalHeader) != tc.principal ||
				strings.HasPrefix(h.Get(server.ForwardedForHeader), "1.2.3.4") || h.Get(server.ForwardedForHeader) == "" {
				t.Errorf("the leader got forwarded-by %q, principal %q, for %q; want f1, %q and the client's address",
					h.Get(server.ForwardedHeader), h.Get(server.ForwardedPrincipalHeader), h.Get(server.ForwardedForHeader), tc.principal)
			}
			if tc.token != "" && h.Get("Authorization") != "Bearer "+tc.token {
				t.Errorf("the leader got Authorization %q, want the client's token", h.Get("Authorization"))
			}
		})
	}
}
