package client_test

import (
	"context"
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
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/testcerts"
	"github.com/logd-dev/logd/logdtest"
)

// secServer answers the security RPCs and Status over HTTP, recording what
// each call carried. It stands in for the transport and the credential
// checks only (headers, TLS, how refusals are coded); the semantics of
// tokens and ACLs are tested against logdtest.
type secServer struct {
	logdv1connect.UnimplementedLogServiceHandler

	// token, if set, is the only bearer token accepted; a call without it
	// is UNAUTHENTICATED.
	token string
	// deny, if set, refuses every call that passes the token check with
	// PERMISSION_DENIED for this permission.
	deny string
	// failFirst, if positive, fails that many calls with UNAVAILABLE
	// after the credential checks.
	failFirst int

	http *httptest.Server

	mu    sync.Mutex
	calls []secCall // guarded by mu
	acls  []*logdv1.ACL
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
func newSecServer(t *testing.T, s *secServer, tlsConf func(*tls.Config)) *secServer {
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
		s.http.TLS = &tls.Config{}
		tlsConf(s.http.TLS)
		s.http.StartTLS()
	} else {
		s.http.Start()
	}
	t.Cleanup(s.http.Close)
	return s
}

func (s *secServer) addr() string {
	return strings.TrimPrefix(strings.TrimPrefix(s.http.URL, "http://"), "https://")
}

func (s *secServer) recorded() []secCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// check refuses a call whose credentials the server does not accept.
func (s *secServer) check(h http.Header) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token != "" && h.Get("Authorization") != "Bearer "+s.token {
		return logdtest.Error(connect.CodeUnauthenticated, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_UNAUTHENTICATED}, "bad or missing token")
	}
	if s.deny != "" {
		return logdtest.Error(connect.CodePermissionDenied, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_PERMISSION_DENIED, Permission: s.deny, Principal: "User:alice"}, "User:alice may not %s", s.deny)
	}
	if s.failFirst > 0 {
		s.failFirst--
		return logdtest.Error(connect.CodeUnavailable, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_UNAVAILABLE}, "no quorum")
	}
	return nil
}

func (s *secServer) Status(_ context.Context, req *connect.Request[logdv1.StatusRequest]) (*connect.Response[logdv1.StatusResponse], error) {
	if err := s.check(req.Header()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&logdv1.StatusResponse{NodeId: "n1", State: "Leader", LeaderId: "n1", Ready: true,
		Members: []*logdv1.Member{{Id: "n1", RaftAddress: "mem:n1", Suffrage: "voter", ApiAddress: s.addr()}}}), nil
}

func (s *secServer) WhoAmI(_ context.Context, req *connect.Request[logdv1.WhoAmIRequest]) (*connect.Response[logdv1.WhoAmIResponse], error) {
	if err := s.check(req.Header()); err != nil {
		return nil, err
	}
	resp := &logdv1.WhoAmIResponse{Principal: "User:ANONYMOUS", Method: "none"}
	if req.Header().Get("Authorization") != "" {
		resp = &logdv1.WhoAmIResponse{Principal: "User:alice", Method: "token", AuthRequired: s.token != ""}
	}
	return connect.NewResponse(resp), nil
}

func (s *secServer) CreateToken(_ context.Context, req *connect.Request[logdv1.CreateTokenRequest]) (*connect.Response[logdv1.CreateTokenResponse], error) {
	if err := s.check(req.Header()); err != nil {
		return nil, err
	}
	info := &logdv1.TokenInfo{Id: "0123456789abcdef", Principal: "User:" + req.Msg.GetPrincipal(), Description: req.Msg.GetDescription(), CreatedMs: 1000, CreatedBy: "User:alice"}
	if ttl := req.Msg.GetTtlMs(); ttl > 0 {
		info.ExpiresMs = info.CreatedMs + ttl
	}
	return connect.NewResponse(&logdv1.CreateTokenResponse{Token: "logd_0123456789abcdef.secret", Info: info}), nil
}

func (s *secServer) ListTokens(_ context.Context, req *connect.Request[logdv1.ListTokensRequest]) (*connect.Response[logdv1.ListTokensResponse], error) {
	if err := s.check(req.Header()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&logdv1.ListTokensResponse{Tokens: []*logdv1.TokenInfo{{Id: "0123456789abcdef", Principal: req.Msg.GetPrincipal(), CreatedMs: 1000, ExpiresMs: 2000, CreatedBy: "User:alice"}}}), nil
}

func (s *secServer) RevokeToken(_ context.Context, req *connect.Request[logdv1.RevokeTokenRequest]) (*connect.Response[logdv1.RevokeTokenResponse], error) {
	if err := s.check(req.Header()); err != nil {
		return nil, err
	}
	if req.Msg.GetId() != "0123456789abcdef" {
		return nil, logdtest.Error(connect.CodeNotFound, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_UNKNOWN_TOKEN}, "no token %s", req.Msg.GetId())
	}
	return connect.NewResponse(&logdv1.RevokeTokenResponse{Info: &logdv1.TokenInfo{Id: req.Msg.GetId(), Principal: "User:bob"}}), nil
}

func (s *secServer) CreateACLs(_ context.Context, req *connect.Request[logdv1.CreateACLsRequest]) (*connect.Response[logdv1.CreateACLsResponse], error) {
	if err := s.check(req.Header()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acls = append(s.acls, req.Msg.GetAcls()...)
	return connect.NewResponse(&logdv1.CreateACLsResponse{Created: int32(len(req.Msg.GetAcls()))}), nil
}

func (s *secServer) ListACLs(_ context.Context, req *connect.Request[logdv1.ListACLsRequest]) (*connect.Response[logdv1.ListACLsResponse], error) {
	if err := s.check(req.Header()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*logdv1.ACL
	for _, a := range s.acls {
		if p := req.Msg.GetFilter().GetPrincipal(); p == "" || p == a.GetPrincipal() {
			out = append(out, a)
		}
	}
	return connect.NewResponse(&logdv1.ListACLsResponse{Acls: out}), nil
}

func (s *secServer) DeleteACLs(_ context.Context, req *connect.Request[logdv1.DeleteACLsRequest]) (*connect.Response[logdv1.DeleteACLsResponse], error) {
	if err := s.check(req.Header()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone, kept []*logdv1.ACL
	for _, a := range s.acls {
		if a.GetPrincipal() == req.Msg.GetFilter().GetPrincipal() {
			gone = append(gone, a)
		} else {
			kept = append(kept, a)
		}
	}
	if !req.Msg.GetDryRun() {
		s.acls = kept
	}
	return connect.NewResponse(&logdv1.DeleteACLsResponse{Acls: gone}), nil
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

// TestBearerToken: the token rides on every call, retries and the
// per-member calls of ClusterStatus included.
func TestBearerToken(t *testing.T) {
	srv := newSecServer(t, &secServer{token: "logd_1.s", failFirst: 1}, nil)
	c := newSecClient(t, srv.addr(), client.Options{Token: "logd_1.s"})
	ctx := testContext(t)
	if _, err := c.WhoAmI(ctx); err != nil { // the first attempt fails, the retry succeeds
		t.Fatalf("WhoAmI: %v", err)
	}
	if _, err := c.ClusterStatus(ctx); err != nil {
		t.Fatalf("ClusterStatus: %v", err)
	}
	calls := srv.recorded()
	var methods []string
	for _, call := range calls {
		methods = append(methods, call.method)
		if call.auth != "Bearer logd_1.s" {
			t.Errorf("%s carried Authorization %q", call.method, call.auth)
		}
	}
	if want := []string{"WhoAmI", "WhoAmI", "Status", "Status"}; !slices.Equal(methods, want) {
		t.Fatalf("calls = %v, want %v", methods, want)
	}

	// Without the option, no header: the server sees an anonymous caller.
	anon := newSecClient(t, srv.addr(), client.Options{})
	_, err := anon.WhoAmI(ctx)
	var ae *client.AuthError
	if !errors.Is(err, client.ErrUnauthenticated) || !errors.As(err, &ae) || !ae.Unauthenticated {
		t.Fatalf("WhoAmI without a token: %v, want an unauthenticated AuthError", err)
	}
	if got := srv.recorded()[len(calls)].auth; got != "" {
		t.Fatalf("a client without a token sent Authorization %q", got)
	}
}

// TestTokenSource: the source is asked before every attempt; its failure
// fails the call without sending it, and is not retried.
func TestTokenSource(t *testing.T) {
	srv := newSecServer(t, &secServer{token: "logd_2.s", failFirst: 1}, nil)
	var mu sync.Mutex
	asked := 0
	var fail error
	src := func(ctx context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		asked++
		return "logd_2.s", fail
	}
	c := newSecClient(t, srv.addr(), client.Options{TokenSource: src})
	if _, err := c.ListTokens(testContext(t), ""); err != nil {
		t.Fatalf("ListTokens: %v", err)
	}
	if asked != 2 || len(srv.recorded()) != 2 {
		t.Fatalf("source asked %d times for %d calls, want 2 and 2", asked, len(srv.recorded()))
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
	if asked != 1 || len(srv.recorded()) != 2 {
		t.Fatalf("failing source asked %d times, %d calls sent; want 1 and none more", asked, len(srv.recorded())-2)
	}
	if c.Current() != srv.addr() {
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

func TestSecurityCalls(t *testing.T) {
	srv := newSecServer(t, &secServer{}, nil)
	c := newSecClient(t, srv.addr(), client.Options{Token: "logd_3.s"})
	ctx := testContext(t)

	id, err := c.WhoAmI(ctx)
	if err != nil || id != (client.Identity{Principal: "User:alice", Method: "token"}) {
		t.Fatalf("WhoAmI = %+v, %v", id, err)
	}
	tok, err := c.CreateToken(ctx, client.CreateTokenRequest{Principal: "bob", Description: "ci", TTL: time.Hour})
	if err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	want := client.TokenInfo{ID: "0123456789abcdef", Principal: "User:bob", Description: "ci", Created: time.UnixMilli(1000), Expires: time.UnixMilli(1000 + time.Hour.Milliseconds()), CreatedBy: "User:alice"}
	if tok.Token != "logd_0123456789abcdef.secret" || tok.Info != want {
		t.Fatalf("CreateToken = %+v, want info %+v", tok, want)
	}
	if _, err := c.CreateToken(ctx, client.CreateTokenRequest{Principal: "bob", TTL: -time.Second}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("CreateToken with a negative TTL: %v", err)
	}
	toks, err := c.ListTokens(ctx, "User:bob")
	if err != nil || len(toks) != 1 || toks[0].Principal != "User:bob" || !toks[0].Expires.Equal(time.UnixMilli(2000)) {
		t.Fatalf("ListTokens = %+v, %v", toks, err)
	}
	if _, err := c.RevokeToken(ctx, "ffffffffffffffff"); !errors.Is(err, client.ErrUnknownToken) {
		t.Fatalf("RevokeToken of an unknown id: %v, want ErrUnknownToken", err)
	}
	if info, err := c.RevokeToken(ctx, "0123456789abcdef"); err != nil || info.Principal != "User:bob" {
		t.Fatalf("RevokeToken = %+v, %v", info, err)
	}

	acls := []client.ACL{
		{Principal: "User:bob", Resource: client.ResourceTopic, Pattern: client.PatternPrefix, Name: "ord", Operation: client.OpWrite, Effect: client.EffectAllow},
		{Principal: "User:carol", Resource: client.ResourceCluster, Pattern: client.PatternLiteral, Name: client.ClusterName, Operation: client.OpAdmin, Effect: client.EffectDeny},
	}
	if n, err := c.CreateACLs(ctx, acls); err != nil || n != 2 {
		t.Fatalf("CreateACLs = %d, %v", n, err)
	}
	got, err := c.ListACLs(ctx, client.ACLFilter{Principal: "User:bob"})
	if err != nil || !slices.Equal(got, acls[:1]) {
		t.Fatalf("ListACLs = %+v, %v", got, err)
	}
	before := len(srv.recorded())
	if _, err := c.DeleteACLs(ctx, client.ACLFilter{}, false); !errors.Is(err, client.ErrInvalidArgument) || len(srv.recorded()) != before {
		t.Fatalf("DeleteACLs with an empty filter: %v after %d calls, want ErrInvalidArgument and no call", err, len(srv.recorded())-before)
	}
	if got, err := c.DeleteACLs(ctx, client.ACLFilter{Principal: "User:carol"}, true); err != nil || !slices.Equal(got, acls[1:]) {
		t.Fatalf("DeleteACLs dry run = %+v, %v", got, err)
	}
	if got, err := c.ListACLs(ctx, client.ACLFilter{}); err != nil || len(got) != 2 {
		t.Fatalf("after a dry run, ListACLs = %+v, %v; want both", got, err)
	}
	if got, err := c.DeleteACLs(ctx, client.ACLFilter{Principal: "User:carol"}, false); err != nil || !slices.Equal(got, acls[1:]) {
		t.Fatalf("DeleteACLs = %+v, %v", got, err)
	}
	if got, err := c.ListACLs(ctx, client.ACLFilter{}); err != nil || !slices.Equal(got, acls[:1]) {
		t.Fatalf("after DeleteACLs, ListACLs = %+v, %v", got, err)
	}
	if s := acls[0].String(); s != `allow User:bob write on topic prefix "ord"` {
		t.Fatalf("ACL.String() = %q", s)
	}
}

// TestTLS: with Options.TLS the client speaks HTTPS, HTTP/2 by ALPN, and
// presents its certificate; a "host:port" server means https.
func TestTLS(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	srv := newSecServer(t, &secServer{}, func(c *tls.Config) {
		*c = *ca.ServerConfig(ca.Node(t, "n1"))
	})
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
		if call.proto != 2 || !slices.Equal(call.peerCNs, []string{"alice"}) {
			t.Fatalf("%s came over HTTP/%d with client certificates %v, want HTTP/2 and [alice]", call.method, call.proto, call.peerCNs)
		}
	}

	// Without a client certificate the server refuses the handshake:
	// unauthenticated, at once.
	retries := 0
	countRetries := client.RetryPolicy{MaxAttempts: 5, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, OnRetry: func(client.RetryEvent) { retries++ }}
	noCert := newSecClient(t, srv.addr(), client.Options{TLS: ca.ClientConfig(tls.Certificate{}), Retry: countRetries})
	_, err := noCert.WhoAmI(testContext(t))
	if !errors.Is(err, client.ErrUnauthenticated) || client.IsRetryable(err) || retries != 0 {
		t.Fatalf("WhoAmI without a client certificate: %v after %d retries, want ErrUnauthenticated at once", err, retries)
	}
	t.Logf("without a client certificate: %v", err)
	// A server the roots do not vouch for is refused, at once too.
	other := testcerts.NewCA(t, "other")
	strange := newSecClient(t, srv.addr(), client.Options{TLS: other.ClientConfig(ca.Client(t, "alice")), Retry: countRetries})
	_, err = strange.WhoAmI(testContext(t))
	if err == nil || !strings.Contains(err.Error(), "certificate") || errors.Is(err, client.ErrUnauthenticated) || client.IsRetryable(err) || retries != 0 {
		t.Fatalf("WhoAmI of a server signed by another CA: %v after %d retries, want a certificate error at once", err, retries)
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
