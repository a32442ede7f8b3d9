package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/auth/certid"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/internal/testcerts"
	"github.com/logd-dev/logd/peer"
	"github.com/logd-dev/logd/replication"
	"github.com/logd-dev/logd/replication/replicationtest"
	"github.com/logd-dev/logd/server"
)

// authEnv is a single-node server with authentication on: a real node,
// its tokens and ACLs, and the audit log in a buffer.
type authEnv struct {
	t       testing.TB
	url     string
	hs      *httptest.Server
	srv     *server.Server
	node    *replication.Node
	backend *replication.Backend
	reg     *prometheus.Registry
	audit   *syncBuffer
	// admin's token is the bootstrap token: a superuser.
	admin string
	ca    *testcerts.CA
}

// syncBuffer is a bytes.Buffer the audit logger and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}

// envConfig varies an authEnv.
type envConfig struct {
	// mod changes the server's options.
	mod func(*server.Options)
	// ca, if set, serves over TLS with a certificate of ca and verifies
	// client certificates of ca when given; ca is then the cluster CA
	// (Options.PeerTLS), which alone vouches for nodes.
	ca *testcerts.CA
	// clientCA, if set, is a second CA the API port trusts for clients
	// (as --tls-client-ca does), but not for nodes.
	clientCA *testcerts.CA
}

// newAuthEnv starts a node with Required on.
func newAuthEnv(t testing.TB, ctx context.Context, cfg envConfig) *authEnv {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	// The node registers its API address, and with it its feature level,
	// which tokens and ACLs need.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := replicationtest.Start(t, replicationtest.Options{APIAdvertise: ln.Addr().String()})
	b := n.Backend
	boot, err := auth.NewToken(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	e := &authEnv{t: t, node: n.Node, backend: b, reg: prometheus.NewRegistry(), audit: &syncBuffer{}, admin: boot.String()}
	opts := server.Options{Backend: b, Logger: logger, Registry: e.reg, Auth: server.AuthOptions{
		Required: true, BootstrapToken: &boot, Audit: slog.New(slog.NewJSONHandler(e.audit, nil)),
	}}
	if cfg.ca != nil {
		n1 := cfg.ca.Node(t, "n1")
		opts.PeerTLS = &peer.TLS{Server: cfg.ca.ServerConfig(n1), Client: cfg.ca.ClientConfig(n1), NodeID: clusterNodeID(cfg.ca)}
	}
	if cfg.mod != nil {
		cfg.mod(&opts)
	}
	e.srv = server.New(opts)
	e.hs = httptest.NewUnstartedServer(e.srv.Handler())
	e.hs.Listener.Close()
	e.hs.Listener = ln
	e.ca = cfg.ca
	if cfg.ca != nil {
		e.hs.EnableHTTP2 = true
		e.hs.TLS = cfg.ca.OptionalClientConfig(cfg.ca.Node(t, "n1"))
		if cfg.clientCA != nil {
			e.hs.TLS.ClientCAs = e.hs.TLS.ClientCAs.Clone()
			e.hs.TLS.ClientCAs.AddCert(cfg.clientCA.Cert)
		}
		e.hs.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes
		e.hs.StartTLS()
	} else {
		var protocols http.Protocols
		protocols.SetHTTP1(true)
		protocols.SetUnencryptedHTTP2(true)
		e.hs.Config.Protocols = &protocols
		e.hs.Start()
	}
	t.Cleanup(e.hs.Close)
	e.url = e.hs.URL
	return e
}

// client calls the node with token ("" for none).
func (e *authEnv) client(token string, opts ...connect.ClientOption) logdv1connect.LogServiceClient {
	return logdv1connect.NewLogServiceClient(e.hs.Client(), e.url, append(opts, connect.WithInterceptors(bearer(token)))...)
}

// tlsClient calls the node over TLS presenting cert (nil for none), with
// token ("" for none) and the extra headers.
func (e *authEnv) tlsClient(cert *tls.Certificate, token string, header http.Header) logdv1connect.LogServiceClient {
	var c tls.Certificate
	if cert != nil {
		c = *cert
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: e.ca.ClientConfig(c), ForceAttemptHTTP2: true}}
	e.t.Cleanup(hc.CloseIdleConnections)
	return logdv1connect.NewLogServiceClient(hc, e.url, connect.WithInterceptors(bearer(token), withHeader(header)))
}

// withHeader adds h to every request.
func withHeader(h http.Header) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			for k, vs := range h {
				for _, v := range vs {
					req.Header().Add(k, v)
				}
			}
			return next(ctx, req)
		}
	}
}

// bearer sends token in the Authorization header.
func bearer(token string) connect.Interceptor { return bearerInterceptor(token) }

// bearerInterceptor sets the token on unary calls and on streams
// (SaveSnapshot).
type bearerInterceptor string

func (b bearerInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if b != "" {
			req.Header().Set("Authorization", "Bearer "+string(b))
		}
		return next(ctx, req)
	}
}

func (b bearerInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		if b != "" {
			conn.RequestHeader().Set("Authorization", "Bearer "+string(b))
		}
		return conn
	}
}

func (b bearerInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// user creates a token for User:name and adds acls; it returns the token.
func (e *authEnv) user(ctx context.Context, name string, acls ...auth.ACL) string {
	e.t.Helper()
	return addUser(e.t, ctx, e.backend, name, acls...)
}

// addUser stores a token for User:name in sec and adds acls; it returns
// the token.
func addUser(t testing.TB, ctx context.Context, sec backend.SecurityAPI, name string, acls ...auth.ACL) string {
	t.Helper()
	tok, err := auth.NewToken(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(tok, auth.User(name), "test", time.Now().UnixMilli(), 0, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := sec.CreateToken(ctx, v, "User:test"); err != nil {
		t.Fatal(err)
	}
	if len(acls) > 0 {
		if _, err := sec.CreateACLs(ctx, acls); err != nil {
			t.Fatal(err)
		}
	}
	return tok.String()
}

// grant adds ACLs.
func (e *authEnv) grant(ctx context.Context, acls ...auth.ACL) {
	e.t.Helper()
	if len(acls) == 0 {
		return
	}
	if _, err := e.backend.CreateACLs(ctx, acls); err != nil {
		e.t.Fatal(err)
	}
}

// auditLines returns the audit log's lines since the last call, decoded.
func (e *authEnv) auditLines() []map[string]any {
	e.t.Helper()
	e.audit.mu.Lock()
	text := e.audit.b.String()
	e.audit.b.Reset()
	e.audit.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			e.t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// state fingerprints what a call could change: the Raft index the node
// applied (tokens and ACLs are replicated state too).
func (e *authEnv) state() uint64 { return e.node.Status().AppliedIndex }

func allow(principal string, r auth.ResourceType, pt auth.PatternType, name string, op auth.Operation) auth.ACL {
	return auth.ACL{Principal: principal, Resource: r, Pattern: pt, Name: name, Operation: op, Effect: auth.Allow}
}

func deny(principal string, r auth.ResourceType, pt auth.PatternType, name string, op auth.Operation) auth.ACL {
	a := allow(principal, r, pt, name, op)
	a.Effect = auth.Deny
	return a
}

// errorInfo returns err's ErrorInfo detail, or nil.
func errorInfo(err error) *logdv1.ErrorInfo {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return nil
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if info, ok := v.(*logdv1.ErrorInfo); ok {
				return info
			}
		}
	}
	return nil
}

// memSecurity is an in-memory server.SecurityBackend, for a follower
// that is no real node (forward_auth_test.go).
type memSecurity struct {
	mu     sync.Mutex
	tokens map[string]tokenEntry // guarded by mu
	acls   *auth.Set             // guarded by mu
}

type tokenEntry struct {
	v  auth.Verifier
	by string
}

func newMemSecurity() *memSecurity {
	return &memSecurity{tokens: map[string]tokenEntry{}, acls: &auth.Set{}}
}

func (b *memSecurity) CreateToken(_ context.Context, v auth.Verifier, by string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens[v.ID] = tokenEntry{v, by}
	return nil
}

func (b *memSecurity) RevokeToken(_ context.Context, id string) (backend.TokenInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.tokens[id]
	if !ok {
		return backend.TokenInfo{}, errors.New("replication: unknown token")
	}
	delete(b.tokens, id)
	return info(e), nil
}

func info(e tokenEntry) backend.TokenInfo {
	return backend.TokenInfo{ID: e.v.ID, Principal: e.v.Principal, Description: e.v.Description, CreatedMs: e.v.CreatedMs, ExpiresMs: e.v.ExpiresMs, CreatedBy: e.by}
}

func (b *memSecurity) Tokens() []backend.TokenInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []backend.TokenInfo
	for _, e := range b.tokens {
		out = append(out, info(e))
	}
	return out
}

func (b *memSecurity) Token(id string) (auth.Verifier, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.tokens[id]
	return e.v, ok
}

func (b *memSecurity) CreateACLs(_ context.Context, acls []auth.ACL) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, n, err := b.acls.With(acls)
	if err != nil {
		return 0, err
	}
	b.acls = s
	return n, nil
}

func (b *memSecurity) DeleteACLs(_ context.Context, f auth.Filter, dryRun bool) ([]auth.ACL, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var match []auth.ACL
	for _, a := range b.acls.ACLs() {
		if f.Matches(a) {
			match = append(match, a)
		}
	}
	if !dryRun {
		b.acls, _ = b.acls.Without(match)
	}
	return match, nil
}

func (b *memSecurity) ACLs() *auth.Set {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.acls
}

// The follower these tests make stores no SCRAM credentials: its
// writes are forwarded, and it lists none.

func (b *memSecurity) SetSCRAMCredential(context.Context, auth.SCRAMCredential, string) (backend.SCRAMInfo, error) {
	return backend.SCRAMInfo{}, backend.ErrNotLeader
}

func (b *memSecurity) DeleteSCRAMCredential(context.Context, string, auth.SCRAMMechanism) (backend.SCRAMInfo, error) {
	return backend.SCRAMInfo{}, backend.ErrNotLeader
}

func (b *memSecurity) SCRAMCredentials() []backend.SCRAMInfo { return nil }

func (b *memSecurity) SCRAMCredential(string, auth.SCRAMMechanism) (auth.SCRAMCredential, bool) {
	return auth.SCRAMCredential{}, false
}

// clusterNodeID is the node id of a node certificate ca signed, as
// tlsconf.Reloader.NodeID gives it: a certificate of another CA is no node.
func clusterNodeID(ca *testcerts.CA) func(*x509.Certificate) (string, bool) {
	return func(c *x509.Certificate) (string, bool) {
		if _, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			return "", false
		}
		return certid.NodeID(c)
	}
}
