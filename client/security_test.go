package client_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/testcerts"
	"github.com/logd-dev/logd/logdtest"
	"github.com/logd-dev/logd/server"
)

// secServer answers Status and WhoAmI over HTTP or TLS and records how
// each call came: the transport details a real node does not show
// (protocol version, certificates, headers). What the calls mean is tested
// against logdtest.
type secServer struct {
	logdv1connect.UnimplementedLogServiceHandler

	http *httptest.Server

	mu    sync.Mutex
	calls []secCall // guarded by mu
}

// secCall is one call as the server saw it.
type secCall struct {
	method  string
	auth    string // the Authorization header
	proto   int    // the HTTP major version
	peerCNs []string
}

// newSecServer serves s over plain HTTP, or with tlsConf over TLS with
// HTTP/2 enabled; it is closed when the test ends.
func newSecServer(t *testing.T, s *secServer, tlsConf *tls.Config) *secServer {
	t.Helper()
	path, h := logdv1connect.NewLogServiceHandler(s)
	mux := http.NewServeMux()
	mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call := secCall{method: strings.TrimPrefix(r.URL.Path, path), auth: r.Header.Get("Authorization"), proto: r.ProtoMajor}
		if r.TLS != nil {
			for _, c := range r.TLS.PeerCertificates {
				call.peerCNs = append(call.peerCNs, c.Subject.CommonName)
			}
		}
		s.mu.Lock()
		s.calls = append(s.calls, call)
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	s.http = httptest.NewUnstartedServer(mux)
	// Refused handshakes are what some tests are about.
	s.http.Config.ErrorLog = log.New(io.Discard, "", 0)
	if tlsConf != nil {
		s.http.EnableHTTP2 = true
		s.http.TLS = tlsConf
		s.http.StartTLS()
	} else {
		s.http.Start()
	}
	t.Cleanup(s.http.Close)
	return s
}

func (s *secServer) addr() string { return s.http.Listener.Addr().String() }

func (s *secServer) recorded() []secCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *secServer) Status(context.Context, *connect.Request[logdv1.StatusRequest]) (*connect.Response[logdv1.StatusResponse], error) {
	return connect.NewResponse(&logdv1.StatusResponse{NodeId: "n1", State: "Leader", LeaderId: "n1", Ready: true,
		Members: []*logdv1.Member{{Id: "n1", RaftAddress: "mem:n1", Suffrage: "voter", ApiAddress: s.addr()}}}), nil
}

func (s *secServer) WhoAmI(context.Context, *connect.Request[logdv1.WhoAmIRequest]) (*connect.Response[logdv1.WhoAmIResponse], error) {
	return connect.NewResponse(&logdv1.WhoAmIResponse{Principal: "User:ANONYMOUS", Method: "none"}), nil
}

func newSecClient(t *testing.T, server string, opts client.Options) *client.Client {
	t.Helper()
	if opts.Retry.MaxAttempts == 0 {
		opts.Retry = fastRetry
	}
	c, err := client.New(server, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// secureNode starts a node that requires authentication, with a
// bootstrap token (User:admin, a superuser), and returns it with that
// token.
func secureNode(t *testing.T, tlsConf *tls.Config) (*logdtest.Server, string) {
	t.Helper()
	boot, err := auth.NewToken(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srv := logdtest.Start(t, logdtest.Options{Auth: server.AuthOptions{Required: true, BootstrapToken: &boot}, TLS: tlsConf})
	return srv, boot.String()
}

// TestBearerToken: the token rides on every call, retries and the
// per-member calls of ClusterStatus included: a node that requires
// authentication would refuse any call without it.
func TestBearerToken(t *testing.T) {
	srv, admin := secureNode(t, nil)
	c := newSecClient(t, srv.URL(), client.Options{Token: admin})
	ctx := testContext(t)
	srv.FailNext("WhoAmI", unavailable()) // the retry must carry the token too
	id, err := c.WhoAmI(ctx)
	if err != nil || id != (client.Identity{Principal: "User:admin", Method: "bootstrap-token", Superuser: true, AuthRequired: true}) {
		t.Fatalf("WhoAmI = %+v, %v", id, err)
	}
	if got := srv.Calls("WhoAmI"); got != 2 {
		t.Fatalf("WhoAmI calls = %d, want 2", got)
	}
	cs, err := c.ClusterStatus(ctx)
	if err != nil || len(cs.Nodes) != 1 || cs.Nodes[0].Error != "" || cs.Nodes[0].State != "Leader" {
		t.Fatalf("ClusterStatus = %+v, %v", cs, err)
	}

	// Without the option, no header: the node sees an anonymous caller.
	anon := newSecClient(t, srv.URL(), client.Options{})
	_, err = anon.WhoAmI(ctx)
	var ae *client.AuthError
	if !errors.Is(err, client.ErrUnauthenticated) || !errors.As(err, &ae) || !ae.Unauthenticated {
		t.Fatalf("WhoAmI without a token: %v, want an unauthenticated AuthError", err)
	}
	if !strings.Contains(err.Error(), "not authenticated: authentication required") {
		t.Fatalf("WhoAmI without a token: %q", err)
	}
}

// TestTokenSource: the source is asked before every attempt; its failure
// fails the call without sending it, and is not retried.
func TestTokenSource(t *testing.T) {
	srv, admin := secureNode(t, nil)
	var mu sync.Mutex
	asked := 0
	var fail error
	src := func(ctx context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		asked++
		return admin, fail
	}
	c := newSecClient(t, srv.URL(), client.Options{TokenSource: src})
	srv.FailNext("ListTokens", unavailable())
	if _, err := c.ListTokens(testContext(t), ""); err != nil {
		t.Fatalf("ListTokens: %v", err)
	}
	if asked != 2 || srv.Calls("ListTokens") != 2 {
		t.Fatalf("source asked %d times for %d calls, want 2 and 2", asked, srv.Calls("ListTokens"))
	}

	mu.Lock()
	// A failure that looks like a lost connection must not be retried
	// either, nor move the client to another member.
	fail = fmt.Errorf("vault: %w", &netOpError)
	asked = 0
	mu.Unlock()
	_, err := c.ListTokens(testContext(t), "")
	if !errors.Is(err, client.ErrTokenSource) || !strings.Contains(err.Error(), "vault") || client.IsRetryable(err) {
		t.Fatalf("ListTokens with a failing source: %v, want ErrTokenSource, not retryable", err)
	}
	if asked != 1 || srv.Calls("ListTokens") != 2 {
		t.Fatalf("failing source asked %d times, %d calls sent; want 1 and none more", asked, srv.Calls("ListTokens")-2)
	}
	if c.Current() != srv.Addr() {
		t.Fatalf("client moved to %s", c.Current())
	}
}

// TestAuthErrorsAreNotRetried: a refusal of the credentials or of a
// permission is made exactly once, for reads and writes alike, and
// carries the permission and principal of ErrorInfo.
func TestAuthErrorsAreNotRetried(t *testing.T) {
	denied := func() error {
		return logdtest.Error(connect.CodePermissionDenied, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_PERMISSION_DENIED, Permission: "write topic orders", Principal: "User:alice"}, "denied")
	}
	unauth := func() error {
		return logdtest.Error(connect.CodeUnauthenticated, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_UNAUTHENTICATED}, "token revoked")
	}
	tests := []struct {
		name    string
		method  string
		fail    error
		want    error
		wantMsg string
		// perm: the error carries the permission and principal.
		perm bool
	}{
		{name: "produce denied", method: "Produce", fail: denied(), want: client.ErrPermissionDenied, wantMsg: `permission denied: User:alice lacks "write topic orders"`, perm: true},
		{name: "read denied", method: "ListTopics", fail: denied(), want: client.ErrPermissionDenied, wantMsg: `permission denied: User:alice lacks "write topic orders"`, perm: true},
		{name: "keyed produce unauthenticated", method: "Produce", fail: unauth(), want: client.ErrUnauthenticated, wantMsg: "not authenticated: token revoked"},
		{name: "read unauthenticated", method: "ListTopics", fail: unauth(), want: client.ErrUnauthenticated, wantMsg: "not authenticated: token revoked"},
		{name: "denied by a proxy, no ErrorInfo", method: "ListTopics", fail: connect.NewError(connect.CodePermissionDenied, errors.New("forbidden")), want: client.ErrPermissionDenied, wantMsg: "permission denied: forbidden"},
		{name: "unauthenticated by a proxy, no ErrorInfo", method: "ListTopics", fail: connect.NewError(connect.CodeUnauthenticated, errors.New("who are you")), want: client.ErrUnauthenticated, wantMsg: "not authenticated: who are you"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Retries on, with plenty of attempts: only the classification
			// keeps the call to one.
			c, srv := newTestClient(t, client.Options{Retry: client.RetryPolicy{MaxAttempts: 10, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}})
			mustCreate(t, c, "orders", 1)
			srv.FailNext(tt.method, tt.fail, tt.fail, tt.fail)
			var err error
			switch tt.method {
			case "Produce":
				_, err = c.Produce(testContext(t), "orders", []client.Record{{Value: []byte("v"), IdempotencyKey: "k"}})
			case "ListTopics":
				_, err = c.ListTopics(testContext(t))
			}
			if !errors.Is(err, tt.want) || errors.Is(err, client.ErrOutcomeUnknown) || client.IsRetryable(err) {
				t.Fatalf("%s error = %v, want %v, not retryable, outcome known", tt.method, err, tt.want)
			}
			if got := srv.Calls(tt.method); got != 1 {
				t.Fatalf("%s made %d calls, want exactly 1", tt.method, got)
			}
			var ae *client.AuthError
			if !errors.As(err, &ae) || !strings.HasSuffix(err.Error(), tt.wantMsg) {
				t.Fatalf("error %q: want an AuthError ending in %q", err, tt.wantMsg)
			}
			if tt.perm && (ae.Permission != "write topic orders" || ae.Principal != "User:alice") {
				t.Fatalf("AuthError = %+v, want the permission and principal of ErrorInfo", ae)
			}
			var ce *connect.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v does not unwrap to the connect error", err)
			}
		})
	}
}

// TestTLS: with Options.TLS the client speaks HTTPS, HTTP/2 by ALPN, and
// presents its certificate; a "host:port" server means https.
func TestTLS(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	srv := newSecServer(t, &secServer{}, ca.ServerConfig(ca.Node(t, "n1")))
	conf := ca.ClientConfig(ca.Client(t, "alice"))

	for _, server := range []string{srv.addr(), srv.http.URL} {
		c := newSecClient(t, server, client.Options{TLS: conf})
		if !strings.HasPrefix(c.Server(), "https://") {
			t.Fatalf("Server() = %q for %q, want https", c.Server(), server)
		}
		if _, err := c.ClusterStatus(testContext(t)); err != nil {
			t.Fatalf("ClusterStatus over TLS: %v", err)
		}
	}
	for _, call := range srv.recorded() {
		if call.proto != 2 || !slices.Equal(call.peerCNs, []string{"alice"}) || call.auth != "" {
			t.Fatalf("%s came over HTTP/%d with client certificates %v and Authorization %q, want HTTP/2, [alice] and none", call.method, call.proto, call.peerCNs, call.auth)
		}
	}

	// Without a client certificate the server refuses the handshake. Under
	// TLS 1.2 the refusal ends the handshake, so the first attempt reads
	// it; Go's server then sends a "handshake failure" alert, which says
	// nothing about certificates: a TLS failure, not retried.
	var retried []error
	countRetries := client.RetryPolicy{MaxAttempts: 30, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, OnRetry: func(e client.RetryEvent) { retried = append(retried, e.Err) }}
	tls12 := ca.ServerConfig(ca.Node(t, "n1"))
	tls12.MaxVersion = tls.VersionTLS12
	srv12 := newSecServer(t, &secServer{}, tls12)
	_, err := newSecClient(t, srv12.addr(), client.Options{TLS: ca.ClientConfig(tls.Certificate{}), Retry: countRetries}).WhoAmI(testContext(t))
	if err == nil || !strings.Contains(err.Error(), "tls: handshake failure") || client.IsRetryable(err) || len(retried) != 0 {
		t.Fatalf("WhoAmI without a client certificate (TLS 1.2): %v after %d retries, want a TLS failure at once", err, len(retried))
	}
	// Under TLS 1.3 the refusal is an alert that follows the client's side
	// of the handshake and names the missing certificate: unauthenticated.
	// When the connection breaks before the request reads the alert (the
	// HTTP/2 transport reports a connection that could not be established,
	// or a write fails), the attempt fails like any lost connection and
	// is retried; a later attempt reads the alert.
	_, err = newSecClient(t, srv.addr(), client.Options{TLS: ca.ClientConfig(tls.Certificate{}), Retry: countRetries}).WhoAmI(testContext(t))
	if !errors.Is(err, client.ErrUnauthenticated) || client.IsRetryable(err) {
		t.Fatalf("WhoAmI without a client certificate: %v, want ErrUnauthenticated", err)
	}
	for _, e := range retried {
		if errors.Is(e, client.ErrUnauthenticated) || !client.IsRetryable(e) {
			t.Fatalf("retried after %v: only a lost connection may be", e)
		}
	}
	t.Logf("without a client certificate: %v (after %d retries)", err, len(retried))
	// A write is refused the same way, with nothing left unknown (the
	// handshake fails before any handler: which RPC does not matter).
	for _, server := range []string{srv.addr(), srv12.addr()} {
		_, err = newSecClient(t, server, client.Options{TLS: ca.ClientConfig(tls.Certificate{}), Retry: countRetries}).CreateTopic(testContext(t), "t", 1, nil)
		if err == nil || errors.Is(err, client.ErrOutcomeUnknown) {
			t.Fatalf("CreateTopic without a client certificate: %v, want a refusal with a known outcome", err)
		}
	}
	retried = nil
	// A server the roots do not vouch for is refused, at once too.
	other := testcerts.NewCA(t, "other")
	_, err = newSecClient(t, srv.addr(), client.Options{TLS: other.ClientConfig(ca.Client(t, "alice")), Retry: countRetries}).WhoAmI(testContext(t))
	if err == nil || !strings.Contains(err.Error(), "certificate") || errors.Is(err, client.ErrUnauthenticated) || client.IsRetryable(err) || len(retried) != 0 {
		t.Fatalf("WhoAmI of a server signed by another CA: %v after %d retries, want a certificate error at once", err, len(retried))
	}
	t.Logf("server of another CA: %v", err)
}

func TestOptionsSecurityValidation(t *testing.T) {
	src := func(context.Context) (string, error) { return "", nil }
	tests := []struct {
		name   string
		server string
		opts   client.Options
		want   string
	}{
		{name: "token and source", server: "127.0.0.1:1", opts: client.Options{Token: "a", TokenSource: src}, want: "set Token or TokenSource, not both"},
		{name: "token with a space", server: "127.0.0.1:1", opts: client.Options{Token: "logd_1 x"}, want: "token: character ' ' not allowed"},
		{name: "token with a newline", server: "127.0.0.1:1", opts: client.Options{Token: "logd_1\n"}, want: `token: character '\n' not allowed`},
		{name: "TLS and an HTTP client", server: "127.0.0.1:1", opts: client.Options{TLS: &tls.Config{}, HTTPClient: http.DefaultClient}, want: "configure TLS in the HTTP client's transport"},
		{name: "TLS and an http URL", server: "http://127.0.0.1:1", opts: client.Options{TLS: &tls.Config{}}, want: "TLS options given for an http:// URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.New(tt.server, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// netOpError is a connection failure, as a token source that fetches its
// token over the network might return.
var netOpError = net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}

// TestSecurityAgainstNode: tokens and ACLs end to end on a node that
// requires authentication.
func TestSecurityAgainstNode(t *testing.T) {
	srv, boot := secureNode(t, nil)
	ctx := testContext(t)
	admin := newSecClient(t, srv.URL(), client.Options{Token: boot})

	tok, err := admin.CreateToken(ctx, client.CreateTokenRequest{Principal: "alice", Description: "billing", TTL: time.Hour})
	if err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	info := tok.Info
	if !strings.HasPrefix(tok.Token, "logd_"+info.ID+".") || info.Principal != "User:alice" || info.Description != "billing" ||
		info.CreatedBy != "User:admin" || info.Expires.Sub(info.Created) != time.Hour {
		t.Fatalf("CreateToken = %+v", tok)
	}
	alice := newSecClient(t, srv.URL(), client.Options{Token: tok.Token, Retry: client.RetryPolicy{MaxAttempts: 10, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}})
	if id, err := alice.WhoAmI(ctx); err != nil || id.Principal != "User:alice" || id.Method != "token" || id.Superuser {
		t.Fatalf("alice's WhoAmI = %+v, %v", id, err)
	}

	// No ACL: refused, once, naming what is missing.
	_, err = alice.CreateTopic(ctx, "orders", 1, nil)
	var ae *client.AuthError
	if !errors.As(err, &ae) || !errors.Is(err, client.ErrPermissionDenied) || ae.Principal != "User:alice" || !strings.HasSuffix(ae.Permission, " topic orders") {
		t.Fatalf("alice's CreateTopic: %v (%+v), want permission denied on topic orders", err, ae)
	}
	if n := srv.Calls("CreateTopic"); n != 1 {
		t.Fatalf("a refused CreateTopic was made %d times, want 1", n)
	}
	t.Logf("refusal: %v", err)

	acls := []client.ACL{
		{Principal: "User:alice", Resource: client.ResourceTopic, Pattern: client.PatternPrefix, Name: "ord", Operation: client.OpAll, Effect: client.EffectAllow},
		{Principal: "User:alice", Resource: client.ResourceCluster, Pattern: client.PatternLiteral, Name: client.ClusterName, Operation: client.OpCreate, Effect: client.EffectAllow},
	}
	if n, err := admin.CreateACLs(ctx, acls); err != nil || n != 2 {
		t.Fatalf("CreateACLs = %d, %v", n, err)
	}
	if n, err := admin.CreateACLs(ctx, acls[:1]); err != nil || n != 0 {
		t.Fatalf("CreateACLs of a present ACL = %d, %v; want 0 new", n, err)
	}
	if got, err := admin.ListACLs(ctx, client.ACLFilter{Principal: "User:alice", Resource: client.ResourceTopic}); err != nil || !slices.Equal(got, acls[:1]) {
		t.Fatalf("ListACLs = %+v, %v", got, err)
	}
	if _, err := alice.CreateTopic(ctx, "orders", 1, nil); err != nil {
		t.Fatalf("alice's CreateTopic with the ACLs: %v", err)
	}
	if _, err := alice.Produce(ctx, "orders", []client.Record{{Value: []byte("v")}}); err != nil {
		t.Fatalf("alice's Produce: %v", err)
	}
	// Lists leave out what the caller may not describe.
	if got, err := alice.ListACLs(ctx, client.ACLFilter{}); err != nil || len(got) != 0 {
		t.Fatalf("alice's ListACLs = %+v, %v; want none", got, err)
	}

	// A dry run removes nothing; then the removal.
	f := client.ACLFilter{Principal: "User:alice", Resource: client.ResourceTopic}
	if got, err := admin.DeleteACLs(ctx, f, true); err != nil || !slices.Equal(got, acls[:1]) {
		t.Fatalf("DeleteACLs dry run = %+v, %v", got, err)
	}
	if got, err := admin.ListACLs(ctx, client.ACLFilter{}); err != nil || len(got) != 2 {
		t.Fatalf("after a dry run, ListACLs = %+v, %v; want both", got, err)
	}
	if got, err := admin.DeleteACLs(ctx, f, false); err != nil || !slices.Equal(got, acls[:1]) {
		t.Fatalf("DeleteACLs = %+v, %v", got, err)
	}
	if _, err := admin.DeleteACLs(ctx, client.ACLFilter{}, false); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("DeleteACLs with an empty filter: %v, want ErrInvalidArgument", err)
	}
	if _, err := alice.Produce(ctx, "orders", []client.Record{{Value: []byte("v"), IdempotencyKey: "k"}}); !errors.Is(err, client.ErrPermissionDenied) {
		t.Fatalf("alice's Produce after the removal: %v, want permission denied", err)
	}

	// Tokens: listed without secrets, revoked, refused.
	toks, err := admin.ListTokens(ctx, "User:alice")
	if err != nil || len(toks) != 1 || toks[0] != info {
		t.Fatalf("ListTokens = %+v, %v; want [%+v]", toks, err, info)
	}
	if got, err := admin.RevokeToken(ctx, info.ID); err != nil || got.ID != info.ID {
		t.Fatalf("RevokeToken = %+v, %v", got, err)
	}
	if _, err := alice.WhoAmI(ctx); !errors.Is(err, client.ErrUnauthenticated) {
		t.Fatalf("WhoAmI with a revoked token: %v, want ErrUnauthenticated", err)
	}
	if _, err := admin.RevokeToken(ctx, info.ID); !errors.Is(err, client.ErrUnknownToken) {
		t.Fatalf("RevokeToken of a revoked token: %v, want ErrUnknownToken", err)
	}
	if _, err := admin.CreateToken(ctx, client.CreateTokenRequest{Principal: "bad name"}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("CreateToken of a bad principal: %v, want ErrInvalidArgument", err)
	}
	if _, err := admin.CreateToken(ctx, client.CreateTokenRequest{Principal: "bob", TTL: -time.Second}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("CreateToken with a negative TTL: %v, want ErrInvalidArgument", err)
	}
	if s := acls[0].String(); s != `allow User:alice all on topic prefix "ord"` {
		t.Fatalf("ACL.String() = %q", s)
	}
}

// TestTLSAgainstNode: a node serving TLS takes a verified client
// certificate as the principal.
func TestTLSAgainstNode(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	srv, boot := secureNode(t, ca.OptionalClientConfig(ca.Node(t, "n1")))
	ctx := testContext(t)
	carol := newSecClient(t, srv.Addr(), client.Options{TLS: ca.ClientConfig(ca.Client(t, "carol"))})
	if id, err := carol.WhoAmI(ctx); err != nil || id.Principal != "User:carol" || id.Method != "certificate" {
		t.Fatalf("WhoAmI with a client certificate = %+v, %v", id, err)
	}
	admin := newSecClient(t, srv.URL(), client.Options{TLS: ca.ClientConfig(ca.Client(t, "carol")), Token: boot})
	if id, err := admin.WhoAmI(ctx); err != nil || id.Principal != "User:admin" {
		t.Fatalf("WhoAmI with a certificate and a token = %+v, %v; want the token's principal", id, err)
	}
	anon := newSecClient(t, srv.Addr(), client.Options{TLS: ca.ClientConfig(tls.Certificate{})})
	if _, err := anon.WhoAmI(ctx); !errors.Is(err, client.ErrUnauthenticated) {
		t.Fatalf("WhoAmI over TLS without credentials: %v, want ErrUnauthenticated", err)
	}
}

// failFirst is an HTTP transport whose first n requests fail with err
// without being sent.
type failFirst struct {
	mu  sync.Mutex
	n   int
	err error
}

func (f *failFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	fail := f.n > 0
	f.n--
	f.mu.Unlock()
	if fail {
		return nil, f.err
	}
	return http.DefaultTransport.RoundTrip(req)
}

// TestUnsentWritesAreRetried: a request that never completely
// reached the server wrote nothing, so a write that met it is retried and
// its outcome stays known: net/http's HTTP/2 transport found the new
// connection closed before its first request was sent, or writing the
// request failed (both happen when a server refuses a client certificate
// after a TLS 1.3 handshake). A connection lost while waiting for the
// answer leaves a write's outcome unknown.
func TestUnsentWritesAreRetried(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	for _, tt := range []struct {
		err         error
		wantUnknown bool
	}{
		{err: errors.New("http2: client conn could not be established")},
		{err: &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}},
		{err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, wantUnknown: true},
		{err: io.ErrUnexpectedEOF, wantUnknown: true},
	} {
		c := newSecClient(t, srv.URL(), client.Options{HTTPClient: &http.Client{Transport: &failFirst{n: 1, err: tt.err}}})
		if _, err := c.CreateTopic(testContext(t), fmt.Sprintf("t%d", srv.Calls("CreateTopic")), 1, nil); errors.Is(err, client.ErrOutcomeUnknown) != tt.wantUnknown {
			t.Fatalf("CreateTopic after %q: %v; want outcome unknown: %v", tt.err, err, tt.wantUnknown)
		}
	}
}
