package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/internal/testcerts"
	"github.com/logd-dev/logd/logdtest"
)

// authServer answers the security RPCs, Status, ListTopics and
// CreateTopic, so that logctl's security commands can be run before the
// node serves them: tokens map to principals, "User:admin" may do
// anything, every other principal only WhoAmI and ListTopics. It records
// each call.
type authServer struct {
	logdv1connect.UnimplementedLogServiceHandler

	http *httptest.Server

	mu     sync.Mutex
	tokens map[string]*logdv1.TokenInfo // by the whole token; guarded by mu
	acls   []*logdv1.ACL                // guarded by mu
	calls  []string                     // guarded by mu
	nextID int                          // guarded by mu
}

const adminToken = "logd_00000000000000ad.admin-secret"

// startAuthServer starts the server, over TLS when tlsConf is set; it is
// closed when the test ends.
func startAuthServer(t *testing.T, tlsConf *tls.Config) *authServer {
	t.Helper()
	s := &authServer{tokens: map[string]*logdv1.TokenInfo{adminToken: {Id: "00000000000000ad", Principal: "User:admin"}}}
	path, h := logdv1connect.NewLogServiceHandler(s)
	mux := http.NewServeMux()
	mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The verified client certificate's CN is the principal.
		r.Header.Del("X-Test-Client-Cn")
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
			r.Header.Set("X-Test-Client-Cn", r.TLS.VerifiedChains[0][0].Subject.CommonName)
		}
		h.ServeHTTP(w, r)
	}))
	s.http = httptest.NewUnstartedServer(mux)
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

func (s *authServer) addr() string { return s.http.Listener.Addr().String() }

func (s *authServer) recorded() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// authorize records the call and refuses it unless the caller may make
// it; it returns the caller's principal and how it was authenticated.
func (s *authServer) authorize(method string, req connect.AnyRequest, perm string) (principal, how string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, method)
	principal, how = "User:ANONYMOUS", "none"
	if h := req.Header().Get("Authorization"); h != "" {
		info, ok := s.tokens[strings.TrimPrefix(h, "Bearer ")]
		if !ok {
			return "", "", logdtest.Error(connect.CodeUnauthenticated, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_UNAUTHENTICATED}, "token is invalid, expired or revoked")
		}
		principal, how = info.GetPrincipal(), "token"
	} else if cn := req.Header().Get("X-Test-Client-Cn"); cn != "" {
		principal, how = "User:"+cn, "certificate"
	}
	switch {
	case principal == "User:admin", method == "WhoAmI", method == "ListTopics":
		return principal, how, nil
	case how == "none":
		return "", "", logdtest.Error(connect.CodeUnauthenticated, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_UNAUTHENTICATED}, "authentication required: present a client certificate or a bearer token")
	}
	return "", "", logdtest.Error(connect.CodePermissionDenied, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_PERMISSION_DENIED, Permission: perm, Principal: principal}, "%s lacks permission %q", principal, perm)
}

func (s *authServer) WhoAmI(_ context.Context, req *connect.Request[logdv1.WhoAmIRequest]) (*connect.Response[logdv1.WhoAmIResponse], error) {
	p, how, err := s.authorize("WhoAmI", req, "")
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&logdv1.WhoAmIResponse{Principal: p, Method: how, Superuser: p == "User:admin", AuthRequired: true}), nil
}

func (s *authServer) Status(_ context.Context, req *connect.Request[logdv1.StatusRequest]) (*connect.Response[logdv1.StatusResponse], error) {
	if _, _, err := s.authorize("Status", req, "describe cluster logd"); err != nil {
		return nil, err
	}
	return connect.NewResponse(&logdv1.StatusResponse{NodeId: "n1", State: "Leader", LeaderId: "n1", Ready: true}), nil
}

func (s *authServer) ListTopics(_ context.Context, req *connect.Request[logdv1.ListTopicsRequest]) (*connect.Response[logdv1.ListTopicsResponse], error) {
	if _, _, err := s.authorize("ListTopics", req, ""); err != nil {
		return nil, err
	}
	var out []*logdv1.TopicInfo
	for _, n := range []string{"orders", "audit", "ordinals"} {
		out = append(out, &logdv1.TopicInfo{Name: n, Partitions: 1})
	}
	return connect.NewResponse(&logdv1.ListTopicsResponse{Topics: out}), nil
}

func (s *authServer) CreateTopic(_ context.Context, req *connect.Request[logdv1.CreateTopicRequest]) (*connect.Response[logdv1.CreateTopicResponse], error) {
	if _, _, err := s.authorize("CreateTopic", req, "create topic "+req.Msg.GetName()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&logdv1.CreateTopicResponse{Topic: &logdv1.TopicInfo{Name: req.Msg.GetName(), Partitions: 1}}), nil
}

func (s *authServer) CreateToken(_ context.Context, req *connect.Request[logdv1.CreateTokenRequest]) (*connect.Response[logdv1.CreateTokenResponse], error) {
	by, _, err := s.authorize("CreateToken", req, "alter token "+req.Msg.GetPrincipal())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	p := req.Msg.GetPrincipal()
	if !strings.Contains(p, ":") {
		p = "User:" + p
	}
	info := &logdv1.TokenInfo{Id: fmt.Sprintf("%016x", s.nextID), Principal: p, Description: req.Msg.GetDescription(), CreatedMs: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixMilli(), CreatedBy: by}
	if ttl := req.Msg.GetTtlMs(); ttl > 0 {
		info.ExpiresMs = info.CreatedMs + ttl
	}
	tok := fmt.Sprintf("logd_%s.secret%d", info.Id, s.nextID)
	s.tokens[tok] = info
	return connect.NewResponse(&logdv1.CreateTokenResponse{Token: tok, Info: info}), nil
}

func (s *authServer) ListTokens(_ context.Context, req *connect.Request[logdv1.ListTokensRequest]) (*connect.Response[logdv1.ListTokensResponse], error) {
	if _, _, err := s.authorize("ListTokens", req, "describe token *"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*logdv1.TokenInfo
	for _, info := range s.tokens {
		if p := req.Msg.GetPrincipal(); info.GetId() != "00000000000000ad" && (p == "" || p == info.GetPrincipal()) {
			out = append(out, info)
		}
	}
	slices.SortFunc(out, func(a, b *logdv1.TokenInfo) int { return strings.Compare(a.GetId(), b.GetId()) })
	return connect.NewResponse(&logdv1.ListTokensResponse{Tokens: out}), nil
}

func (s *authServer) RevokeToken(_ context.Context, req *connect.Request[logdv1.RevokeTokenRequest]) (*connect.Response[logdv1.RevokeTokenResponse], error) {
	if _, _, err := s.authorize("RevokeToken", req, "alter token *"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for tok, info := range s.tokens {
		if info.GetId() == req.Msg.GetId() {
			delete(s.tokens, tok)
			return connect.NewResponse(&logdv1.RevokeTokenResponse{Info: info}), nil
		}
	}
	return nil, logdtest.Error(connect.CodeNotFound, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_UNKNOWN_TOKEN}, "unknown token %q", req.Msg.GetId())
}

func (s *authServer) CreateACLs(_ context.Context, req *connect.Request[logdv1.CreateACLsRequest]) (*connect.Response[logdv1.CreateACLsResponse], error) {
	if _, _, err := s.authorize("CreateACLs", req, "alter acl topic"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	created := 0
	for _, a := range req.Msg.GetAcls() {
		if !slices.ContainsFunc(s.acls, func(b *logdv1.ACL) bool { return aclKey(a) == aclKey(b) }) {
			s.acls = append(s.acls, a)
			created++
		}
	}
	return connect.NewResponse(&logdv1.CreateACLsResponse{Created: int32(created)}), nil
}

func aclKey(a *logdv1.ACL) [6]string {
	return [6]string{a.GetPrincipal(), a.GetResource(), a.GetPattern(), a.GetName(), a.GetOperation(), a.GetEffect()}
}

// selects applies an ACL filter: each set field must equal the ACL's.
func selects(f *logdv1.ACLFilter, a *logdv1.ACL) bool {
	fk := [6]string{f.GetPrincipal(), f.GetResource(), f.GetPattern(), f.GetName(), f.GetOperation(), f.GetEffect()}
	ak := aclKey(a)
	for i := range fk {
		if fk[i] != "" && fk[i] != ak[i] {
			return false
		}
	}
	return true
}

func (s *authServer) ListACLs(_ context.Context, req *connect.Request[logdv1.ListACLsRequest]) (*connect.Response[logdv1.ListACLsResponse], error) {
	if _, _, err := s.authorize("ListACLs", req, "describe acl *"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*logdv1.ACL
	for _, a := range s.acls {
		if selects(req.Msg.GetFilter(), a) {
			out = append(out, a)
		}
	}
	return connect.NewResponse(&logdv1.ListACLsResponse{Acls: out}), nil
}

func (s *authServer) DeleteACLs(_ context.Context, req *connect.Request[logdv1.DeleteACLsRequest]) (*connect.Response[logdv1.DeleteACLsResponse], error) {
	method := "DeleteACLs"
	if req.Msg.GetDryRun() {
		method += "(dry run)"
	}
	if _, _, err := s.authorize(method, req, "alter acl *"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone, kept []*logdv1.ACL
	for _, a := range s.acls {
		if selects(req.Msg.GetFilter(), a) {
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

// runCLIEnv runs logctl in-process with the given environment (and no
// other).
func runCLIEnv(t *testing.T, env map[string]string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, strings.NewReader(""), &stdout, &stderr, func(k string) string { return env[k] })
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// secStep is one logctl invocation of a security script.
type secStep struct {
	args     string
	env      map[string]string // on top of LOGCTL_SERVER
	wantCode int
	stdout   []string // patterns stdout must match
	stderr   []string // patterns stderr must match
	// calls, if set, are the calls the server must have seen, in order.
	calls []string
}

// runSecScript runs steps against srv, each with LOGCTL_SERVER set to it.
func runSecScript(t *testing.T, srv *authServer, steps []secStep) {
	t.Helper()
	for i, s := range steps {
		env := map[string]string{"LOGCTL_SERVER": srv.addr()}
		for k, v := range s.env {
			env[k] = v
		}
		before := len(srv.recorded())
		r := runCLIEnv(t, env, strings.Fields(s.args)...)
		where := fmt.Sprintf("step %d: logctl %s", i, s.args)
		if r.code != s.wantCode {
			t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", where, r.code, s.wantCode, r.stdout, r.stderr)
		}
		for _, p := range s.stdout {
			if !regexp.MustCompile(p).MatchString(r.stdout) {
				t.Fatalf("%s: stdout does not match %q:\n%s", where, p, r.stdout)
			}
		}
		for _, p := range s.stderr {
			if !regexp.MustCompile(p).MatchString(r.stderr) {
				t.Fatalf("%s: stderr does not match %q:\n%s", where, p, r.stderr)
			}
		}
		if s.wantCode != 0 && strings.Count(r.stderr, "\n") != 1 {
			t.Fatalf("%s: want one error line on stderr, got:\n%s", where, r.stderr)
		}
		if got := srv.recorded()[before:]; s.calls != nil && !slices.Equal(got, s.calls) {
			t.Fatalf("%s: calls %q, want %q", where, got, s.calls)
		}
	}
}

func TestCLITokens(t *testing.T) {
	srv := startAuthServer(t, nil)
	admin := map[string]string{"LOGCTL_TOKEN": adminToken}
	runSecScript(t, srv, []secStep{
		{args: "whoami", stdout: []string{`(?m)^Principal:\s+User:ANONYMOUS$`, `(?m)^Authenticated by:\s+none$`, `(?m)^Superuser:\s+no$`}},
		{args: "whoami -o json", env: admin, stdout: []string{`"principal": "User:admin"`, `"method": "token"`, `"superuser": true`, `"auth_required": true`}},
		{args: "token create --principal alice --description billing --ttl 720h", env: admin, stdout: []string{`^logd_0000000000000001\.secret1\n$`},
			stderr: []string{`^logctl: created token 0000000000000001 for User:alice \(expires 2026-02-01T03:04:05Z\); it will not be shown again: store it now\n$`}},
		{args: "token create --principal User:bob -o json", env: admin, stdout: []string{`"token": "logd_0000000000000002\.secret2"`, `"principal": "User:bob"`, `"created_by": "User:admin"`},
			stderr: []string{`\(does not expire\); it will not be shown again`}},
		{args: "token list", env: admin, stdout: []string{
			`(?m)^ID\s+PRINCIPAL\s+DESCRIPTION\s+CREATED\s+EXPIRES\s+CREATED BY$`,
			`(?m)^0000000000000001\s+User:alice\s+billing\s+2026-01-02T03:04:05Z\s+2026-02-01T03:04:05Z\s+User:admin$`,
			`(?m)^0000000000000002\s+User:bob\s+-\s+2026-01-02T03:04:05Z\s+never\s+User:admin$`}},
		{args: "token list --principal User:bob -o json", env: admin, stdout: []string{`"id": "0000000000000002"`}},
		{args: "--token logd_0000000000000001.secret1 whoami", stdout: []string{`(?m)^Principal:\s+User:alice$`}},
		{args: "token revoke 0000000000000001", env: admin, stdout: []string{`^revoked token 0000000000000001 of User:alice\n$`}},
		{args: "token revoke 0000000000000001", env: admin, wantCode: 3, stderr: []string{`^logctl: revoke token 0000000000000001: .*unknown token`}},
		{args: "--token logd_0000000000000001.secret1 whoami", wantCode: 6, calls: []string{"WhoAmI"},
			stderr: []string{`^logctl: not authenticated: token is invalid, expired or revoked \(give a token with --token-file, --token or LOGCTL_TOKEN, or a client certificate with --tls-cert and --tls-key\)\n$`}},
		{args: "token list -o json", wantCode: 6, calls: []string{"ListTokens"}, stderr: []string{`^logctl: not authenticated: authentication required`}},
		{args: "token create", env: admin, wantCode: 2, calls: []string{}, stderr: []string{`required flag\(s\) "principal" not set`}},
		{args: "token create --principal x --ttl -1h", env: admin, wantCode: 2, calls: []string{}, stderr: []string{`--ttl -1h0m0s is negative`}},
	})
	// The token list of an empty cluster is an empty JSON array.
	r := runCLIEnv(t, map[string]string{"LOGCTL_SERVER": srv.addr(), "LOGCTL_TOKEN": adminToken}, "token", "list", "--principal", "nobody", "-o", "json")
	if r.code != 0 || r.stdout != "[]\n" {
		t.Fatalf("empty token list: exit %d, stdout %q", r.code, r.stdout)
	}
}

func TestCLIACLs(t *testing.T) {
	srv := startAuthServer(t, nil)
	admin := map[string]string{"LOGCTL_TOKEN": adminToken}
	runSecScript(t, srv, []secStep{
		{args: "acl add --principal alice --topic ord --prefix --operation read,write --dry-run", env: admin, calls: []string{"ListTopics"},
			stdout: []string{`(?m)^PRINCIPAL\s+EFFECT\s+OPERATION\s+RESOURCE\s+PATTERN\s+NAME$`, `(?m)^User:alice\s+allow\s+read\s+topic\s+prefix\s+ord$`, `(?m)^User:alice\s+allow\s+write\s+topic\s+prefix\s+ord$`,
				`(?m)^Existing topics matched \(2\): orders, ordinals$`},
			stderr: []string{`dry run: nothing changed; run without --dry-run to add 2 ACLs`}},
		{args: "acl add --principal alice --topic * --operation read --dry-run -o json", env: admin,
			stdout: []string{`"dry_run": true`, `"created": 0`, `(?s)"matching_topics": \[\s*"audit",\s*"orders",\s*"ordinals"\s*\]`}},
		{args: "acl add --principal ops --cluster --operation admin --dry-run -o json", env: admin, calls: []string{},
			stdout: []string{`"name": "logd"`, `"matching_topics": null`}},
		{args: "acl add --principal alice --topic ord --prefix --operation read,write", env: admin, calls: []string{"CreateACLs"},
			stderr: []string{`^logctl: added 2 ACLs \(2 new\)\n$`}},
		{args: "acl add --principal alice,* --topic ord --prefix --operation read --deny", env: admin, stderr: []string{`added 2 ACLs \(2 new\)`}},
		{args: "acl add --principal alice --topic ord --prefix --operation write -o json", env: admin, stdout: []string{`"created": 0`}},
		{args: "acl add --principal Node:n1 --token-for bob --operation alter", env: admin},
		{args: "acl list", env: admin, stdout: []string{`(?m)^User:alice\s+allow\s+read\s+topic\s+prefix\s+ord$`, `(?m)^\*\s+deny\s+read\s+topic\s+prefix\s+ord$`, `(?m)^Node:n1\s+allow\s+alter\s+token\s+literal\s+bob$`}},
		{args: "acl list --deny -o json", env: admin, stdout: []string{`(?s)^\[\s*\{\s*"principal": "User:alice",.*"effect": "deny".*"principal": "\*"`}},
		{args: "acl list --resource token", env: admin, stdout: []string{`(?m)^Node:n1\s+allow\s+alter\s+token\s+literal\s+bob$`}},
		{args: "acl list --principal nobody -o json", env: admin, stdout: []string{`^\[\]\n$`}},
		{args: "acl remove --principal alice --topic ord --prefix --operation write --dry-run", env: admin, calls: []string{"DeleteACLs(dry run)"},
			stdout: []string{`(?m)^User:alice\s+allow\s+write\s+topic\s+prefix\s+ord$`}, stderr: []string{`dry run: nothing changed; run without --dry-run to remove 1 ACL\n$`}},
		{args: "acl remove --principal alice --deny", env: admin, calls: []string{"DeleteACLs(dry run)", "DeleteACLs"},
			stdout: []string{`(?m)^User:alice\s+deny\s+read\s+topic\s+prefix\s+ord$`}, stderr: []string{`^logctl: removed 1 ACL\n$`}},
		{args: "acl remove --principal carol", env: admin, calls: []string{"DeleteACLs(dry run)"}, stderr: []string{`no ACL matches the filters; nothing removed`}},
		{args: "acl remove --resource token -o json", env: admin, stdout: []string{`"dry_run": false`, `"principal": "Node:n1"`}},
		{args: "acl list --resource token -o json", env: admin, stdout: []string{`^\[\]\n$`}},
		// Bad command lines change nothing and make no call.
		{args: "acl remove", env: admin, wantCode: 2, calls: []string{}, stderr: []string{`give at least one filter`}},
		{args: "acl add --principal alice --operation read", env: admin, wantCode: 2, calls: []string{}, stderr: []string{`give the resource`}},
		{args: "acl add --principal alice --topic a --group b --operation read", env: admin, wantCode: 2, calls: []string{}, stderr: []string{`give one resource, not --topic and --group`}},
		{args: "acl add --principal alice --topic a --operation read,fly", env: admin, wantCode: 2, calls: []string{}, stderr: []string{`--operation "fly": want one of read, write`}},
		{args: "acl add --principal Group:x --topic a --operation read", env: admin, wantCode: 2, calls: []string{}, stderr: []string{`--principal "Group:x"`}},
		{args: "acl add --principal alice --cluster --prefix --operation admin", env: admin, wantCode: 2, calls: []string{}, stderr: []string{`--prefix does not apply to --cluster`}},
		{args: "acl add --principal alice --topic * --prefix --operation read", env: admin, wantCode: 2, calls: []string{}, stderr: []string{`--prefix with name \*`}},
		{args: "acl add --principal alice --acl tpoic --operation read", env: admin, wantCode: 2, calls: []string{}, stderr: []string{`--acl "tpoic": name a resource type`}},
		{args: "acl list --topic a --resource group", env: admin, wantCode: 2, calls: []string{}, stderr: []string{`give --resource or a resource flag`}},
		{args: "acl list --operation read,write", env: admin, wantCode: 2, calls: []string{}, stderr: []string{`a filter takes one operation`}},
		{args: "acl list --prefix --pattern literal", env: admin, wantCode: 2, calls: []string{}, stderr: []string{`--prefix and --pattern literal disagree`}},
	})
}

// TestCLIAuthRefusals: refusals exit 6 with one clear line, after exactly
// one call.
func TestCLIAuthRefusals(t *testing.T) {
	srv := startAuthServer(t, nil)
	admin := map[string]string{"LOGCTL_TOKEN": adminToken}
	r := runCLIEnv(t, map[string]string{"LOGCTL_SERVER": srv.addr(), "LOGCTL_TOKEN": adminToken}, "token", "create", "--principal", "alice")
	if r.code != 0 {
		t.Fatalf("token create: exit %d: %s", r.code, r.stderr)
	}
	alice := map[string]string{"LOGCTL_TOKEN": strings.TrimSpace(r.stdout)}
	runSecScript(t, srv, []secStep{
		{args: "topic create orders", env: alice, wantCode: 6, calls: []string{"CreateTopic"},
			stderr: []string{`^logctl: permission denied: User:alice lacks "create topic orders" \(an administrator can grant it: logctl acl add --principal User:alice --topic orders --operation create\)\n$`}},
		{args: "acl list", env: alice, wantCode: 6, calls: []string{"ListACLs"},
			stderr: []string{`^logctl: permission denied: User:alice lacks "describe acl \*" \(an administrator can grant it: logctl acl add --principal User:alice --acl \* --operation describe\)\n$`}},
		{args: "topic create orders", wantCode: 6, calls: []string{"CreateTopic"}, stderr: []string{`^logctl: not authenticated: authentication required: .* \(give a token with`}},
		{args: "status", wantCode: 6, calls: []string{"Status"}},
		{args: "topic create orders", env: admin, stdout: []string{`created topic orders`}},
	})
}

// TestCLIServerEnv: LOGCTL_SERVER, then LOGD_SERVER, then the default;
// --server wins over both.
func TestCLIServerEnv(t *testing.T) {
	srv := startAuthServer(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	tests := []struct {
		name string
		env  map[string]string
		args string
		want int
	}{
		{name: "LOGCTL_SERVER", env: map[string]string{"LOGCTL_SERVER": srv.addr()}, args: "whoami", want: 0},
		{name: "LOGD_SERVER as an alias", env: map[string]string{"LOGD_SERVER": srv.addr()}, args: "whoami", want: 0},
		{name: "LOGCTL_SERVER wins over LOGD_SERVER", env: map[string]string{"LOGCTL_SERVER": srv.addr(), "LOGD_SERVER": down}, args: "whoami", want: 0},
		{name: "--server wins over both", env: map[string]string{"LOGCTL_SERVER": down, "LOGD_SERVER": down}, args: "whoami --server " + srv.addr(), want: 0},
		{name: "LOGCTL_SERVER down", env: map[string]string{"LOGCTL_SERVER": down, "LOGD_SERVER": srv.addr()}, args: "whoami --max-retry-time 0", want: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLIEnv(t, tt.env, strings.Fields(tt.args)...)
			if r.code != tt.want {
				t.Fatalf("exit %d, want %d; stderr %s", r.code, tt.want, r.stderr)
			}
		})
	}
}

// TestCLICredentialSources: --token, --token-file and their variables.
func TestCLICredentialSources(t *testing.T) {
	srv := startAuthServer(t, nil)
	dir := t.TempDir()
	file := filepath.Join(dir, "admin.token")
	if err := os.WriteFile(file, []byte(adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	const admin, anon = `(?m)^Principal:\s+User:admin$`, `(?m)^Principal:\s+User:ANONYMOUS$`
	runSecScript(t, srv, []secStep{
		{args: "whoami --token " + adminToken, stdout: []string{admin}},
		{args: "whoami --token-file " + file, stdout: []string{admin}},
		{args: "whoami", env: map[string]string{"LOGCTL_TOKEN_FILE": file}, stdout: []string{admin}},
		{args: "whoami", env: map[string]string{"LOGCTL_TOKEN": adminToken}, stdout: []string{admin}},
		// A flag wins over the variables, both of them.
		{args: "whoami --token-file " + file, env: map[string]string{"LOGCTL_TOKEN": "logd_bad.bad"}, stdout: []string{admin}},
		{args: "whoami", env: map[string]string{"LOGD_TOKEN": adminToken}, stdout: []string{anon}},
		{args: "whoami --token x --token-file " + file, wantCode: 2, calls: []string{}, stderr: []string{`give --token or --token-file, not both`}},
		{args: "whoami", env: map[string]string{"LOGCTL_TOKEN": "x", "LOGCTL_TOKEN_FILE": file}, wantCode: 2, calls: []string{}, stderr: []string{`give LOGCTL_TOKEN or LOGCTL_TOKEN_FILE, not both`}},
		{args: "whoami --token-file " + empty, wantCode: 2, calls: []string{}, stderr: []string{`--token-file .* is empty`}},
		{args: "whoami --token-file " + filepath.Join(dir, "nope"), wantCode: 2, calls: []string{}, stderr: []string{`--token-file: open .*no such file`}},
		{args: "whoami", env: map[string]string{"LOGCTL_TOKEN": "two words"}, wantCode: 1, calls: []string{}, stderr: []string{`token: character ' ' not allowed`}},
	})
}

// TestCLITLS: TLS and mutual TLS from PEM files.
func TestCLITLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := testcerts.NewCA(t, "cluster"), testcerts.NewCA(t, "other")
	node := ca.Node(t, "n1")
	caFile, otherCA := caFile(t, dir, "ca", ca), caFile(t, dir, "other", other)
	certFile, keyFile := pemFiles(t, dir, "carol", ca.Client(t, "carol"))
	_, nodeKey := pemFiles(t, dir, "n1", node)
	srv := startAuthServer(t, ca.OptionalClientConfig(node))
	host := srv.addr()
	strict := startAuthServer(t, ca.ServerConfig(node))
	tlsEnv := map[string]string{"LOGCTL_TLS_CA": caFile, "LOGCTL_TLS_CERT": certFile, "LOGCTL_TLS_KEY": keyFile, "LOGCTL_SERVER": host}
	tests := []struct {
		name   string
		env    map[string]string
		args   string
		want   int
		stdout string
		stderr string
	}{
		{name: "mutual TLS from flags", args: fmt.Sprintf("whoami --server %s --tls-ca %s --tls-cert %s --tls-key %s", host, caFile, certFile, keyFile), stdout: `(?m)^Principal:\s+User:carol$`},
		{name: "mutual TLS from the environment", env: tlsEnv, args: "whoami", stdout: `(?m)^Authenticated by:\s+certificate$`},
		{name: "https URL and a CA, no client certificate", args: fmt.Sprintf("whoami --server https://%s --tls-ca %s", host, caFile), stdout: `(?m)^Principal:\s+User:ANONYMOUS$`},
		{name: "a token over TLS", args: fmt.Sprintf("whoami --server %s --tls-ca %s --token %s", host, caFile, adminToken), stdout: `(?m)^Principal:\s+User:admin$`},
		{name: "no client certificate where one is required", args: fmt.Sprintf("whoami --server %s --tls-ca %s", strict.addr(), caFile), want: 6,
			stderr: `^logctl: not authenticated: the server refused the TLS client certificate: remote error: tls: certificate required \(give a token .* or a client certificate with --tls-cert and --tls-key\)\n$`},
		{name: "client certificate where one is required", args: fmt.Sprintf("whoami --server %s --tls-ca %s --tls-cert %s --tls-key %s", strict.addr(), caFile, certFile, keyFile), stdout: `(?m)^Principal:\s+User:carol$`},
		{name: "server of another CA", args: fmt.Sprintf("whoami --server %s --tls-ca %s", host, otherCA), want: 1, stderr: `^logctl: whoami: tls: failed to verify certificate: x509: certificate signed by unknown authority`},
		{name: "plain HTTP to a TLS port", args: fmt.Sprintf("whoami --server %s", host), want: 1, stderr: `400 Bad Request \(is it a TLS port\? give --tls-ca, or an https:// --server\)`},
		{name: "http URL with TLS flags", args: fmt.Sprintf("whoami --server http://%s --tls-ca %s", host, caFile), want: 2, stderr: `is plain http:// but TLS settings are given`},
		{name: "certificate without key", args: fmt.Sprintf("whoami --server %s --tls-cert %s", host, certFile), want: 2, stderr: `needs both --tls-cert and --tls-key`},
		{name: "key that does not match", args: fmt.Sprintf("whoami --server %s --tls-cert %s --tls-key %s", host, certFile, nodeKey), want: 2, stderr: `--tls-cert .* with --tls-key .*: tls: private key does not match`},
		{name: "CA file without a certificate", env: map[string]string{"LOGCTL_TLS_CA": keyFile}, args: "whoami --server " + host, want: 2, stderr: `LOGCTL_TLS_CA .*carol.key: no PEM certificate in it`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLIEnv(t, tt.env, strings.Fields(tt.args)...)
			if r.code != tt.want {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.want, r.stdout, r.stderr)
			}
			if tt.stdout != "" && !regexp.MustCompile(tt.stdout).MatchString(r.stdout) {
				t.Fatalf("stdout does not match %q:\n%s", tt.stdout, r.stdout)
			}
			if tt.stderr != "" && !regexp.MustCompile(tt.stderr).MatchString(r.stderr) {
				t.Fatalf("stderr does not match %q:\n%s", tt.stderr, r.stderr)
			}
			if tt.want != 0 && strings.Count(r.stderr, "\n") != 1 {
				t.Fatalf("want one error line on stderr, got:\n%s", r.stderr)
			}
		})
	}
}

func TestGrantCommand(t *testing.T) {
	tests := []struct{ principal, permission, want string }{
		{"User:alice", "write topic orders", "logctl acl add --principal User:alice --topic orders --operation write"},
		{"User:alice", "read group billing", "logctl acl add --principal User:alice --group billing --operation read"},
		{"User:alice", "read queue workers", "logctl acl add --principal User:alice --queue workers --operation read"},
		{"Node:n2", "admin cluster logd", "logctl acl add --principal Node:n2 --cluster --operation admin"},
		{"User:alice", "alter token bob", "logctl acl add --principal User:alice --token-for bob --operation alter"},
		{"User:alice", "describe acl topic", "logctl acl add --principal User:alice --acl topic --operation describe"},
		{"User:alice", "write topic", ""},
		{"User:alice", "fly topic orders", ""},
		{"User:alice", "read planet mars", ""},
		{"", "write topic orders", ""},
	}
	for _, tt := range tests {
		if got := grantCommand(tt.principal, tt.permission); got != tt.want {
			t.Errorf("grantCommand(%q, %q) = %q, want %q", tt.principal, tt.permission, got, tt.want)
		}
	}
}

// pemFiles writes cert and its key as PEM files in dir and returns their
// paths.
func pemFiles(t *testing.T, dir, name string, cert tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	writeFile(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}))
	writeFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}))
	return certFile, keyFile
}

// caFile writes the CA's certificate as a PEM file in dir.
func caFile(t *testing.T, dir, name string, ca *testcerts.CA) string {
	t.Helper()
	p := filepath.Join(dir, name+".pem")
	writeFile(t, p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw}))
	return p
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
