package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/internal/testcerts"
	"github.com/logd-dev/logd/server"
)

// whoami returns "principal method superuser" or the call's error.
func whoami(ctx context.Context, c logdv1connect.LogServiceClient) (string, error) {
	r, err := c.WhoAmI(ctx, connect.NewRequest(&logdv1.WhoAmIRequest{}))
	if err != nil {
		return "", err
	}
	s := r.Msg.Principal + " " + r.Msg.Method
	if r.Msg.Superuser {
		s += " superuser"
	}
	return s, nil
}

// TestAuthentication: which credentials name which principal, and which
// are refused, whatever else the call carries.
func TestAuthentication(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := time.Now()
	var clock time.Time
	ca := testcerts.NewCA(t, "cluster")
	e := newAuthEnv(t, ctx, envConfig{ca: ca, mod: func(o *server.Options) {
		o.Auth.Superusers = []auth.Principal{auth.User("root")}
		clock = now
		o.Auth.Now = func() time.Time { return clock }
	}})
	alice := e.user(ctx, "alice")
	root := e.user(ctx, "root")
	tok, err := auth.ParseToken(alice)
	if err != nil {
		t.Fatal(err)
	}
	wrongSecret := auth.Token{ID: tok.ID, Secret: strings.Repeat("A", len(tok.Secret))}.String()
	boot, err := auth.ParseToken(e.admin)
	if err != nil {
		t.Fatal(err)
	}
	wrongBoot := auth.Token{ID: boot.ID, Secret: tok.Secret}.String()
	// A token that expires in a minute of the server's clock.
	short, err := auth.NewToken(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(short, auth.User("dora"), "", now.UnixMilli(), now.Add(time.Minute).UnixMilli(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.backend.CreateToken(ctx, v, "User:test"); err != nil {
		t.Fatal(err)
	}
	carol := ca.Client(t, "carol")
	other := testcerts.NewCA(t, "other").Client(t, "mallory")
	for _, tc := range []struct {
		name   string
		cert   *tls.Certificate
		header http.Header
		token  string
		// want is whoami's answer; "" wants UNAUTHENTICATED.
		want string
	}{
		{name: "nothing"},
		{name: "token", token: alice, want: "User:alice token"},
		{name: "superuser token", token: root, want: "User:root token superuser"},
		{name: "bootstrap token", token: e.admin, want: "User:admin bootstrap-token superuser"},
		{name: "bootstrap id with another secret", token: wrongBoot},
		{name: "right id, wrong secret", token: wrongSecret},
		{name: "malformed token", token: "logd_nothex.secret"},
		{name: "not a token", token: "hunter2"},
		{name: "basic auth", header: http.Header{"Authorization": {"Basic YWxpY2U6cHc="}}},
		{name: "certificate", cert: &carol, want: "User:carol certificate"},
		{name: "certificate and token: the token's", cert: &carol, token: alice, want: "User:alice token"},
		{name: "certificate and bad token", cert: &carol, token: wrongSecret},
		// The client sends no certificate the server's CAs did not sign, or
		// the handshake fails: either way no principal.
		{name: "certificate of another CA", cert: &other, want: "refused"},
		{name: "client-set forwarded principal is ignored", token: alice,
			header: http.Header{server.ForwardedHeader: {"n2"}, server.ForwardedPrincipalHeader: {"bootstrap-token User:admin"}}, want: "User:alice token"},
		{name: "expiring token before its time", token: short.String(), want: "User:dora token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := e.tlsClient(tc.cert, "", tc.header)
			if tc.token != "" {
				c = e.tlsClient(tc.cert, tc.token, tc.header)
			}
			got, err := whoami(ctx, c)
			switch {
			case tc.want == "refused":
				if err == nil {
					t.Errorf("got %q; want a failed handshake or UNAUTHENTICATED", got)
				}
			case tc.want == "" && (connect.CodeOf(err) != connect.CodeUnauthenticated || errorInfo(err).GetReason() != logdv1.Reason_REASON_UNAUTHENTICATED):
				t.Errorf("got %q, %v; want UNAUTHENTICATED", got, err)
			case tc.want != "" && (err != nil || got != tc.want):
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	t.Run("expired", func(t *testing.T) {
		clock = now.Add(time.Minute)
		defer func() { clock = now }()
		if _, err := whoami(ctx, e.tlsClient(nil, short.String(), nil)); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("an expired token: %v, want UNAUTHENTICATED", err)
		}
	})
	t.Run("revoked", func(t *testing.T) {
		c := e.tlsClient(nil, alice, nil)
		if _, err := whoami(ctx, c); err != nil {
			t.Fatal(err)
		}
		if _, err := e.tlsClient(nil, e.admin, nil).RevokeToken(ctx, connect.NewRequest(&logdv1.RevokeTokenRequest{Id: tok.ID})); err != nil {
			t.Fatal(err)
		}
		if _, err := whoami(ctx, c); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("a revoked token: %v, want UNAUTHENTICATED", err)
		}
	})
}

// TestUnauthenticatedProtocols: gRPC, Connect and plain JSON clients
// each see the refusal in their own terms.
func TestUnauthenticatedProtocols(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := newAuthEnv(t, ctx, envConfig{})
	for name, c := range map[string]logdv1connect.LogServiceClient{
		"connect": e.client(""), "grpc": e.client("", connect.WithGRPC()), "grpc-web": e.client("", connect.WithGRPCWeb()),
		"connect json": e.client("", connect.WithProtoJSON()),
	} {
		if _, err := c.ListTopics(ctx, connect.NewRequest(&logdv1.ListTopicsRequest{})); connect.CodeOf(err) != connect.CodeUnauthenticated ||
			errorInfo(err).GetReason() != logdv1.Reason_REASON_UNAUTHENTICATED {
			t.Errorf("%s: %v, want UNAUTHENTICATED with its reason", name, err)
		}
	}
	// curl: a JSON POST gets HTTP 401.
	resp, err := http.Post(e.url+logdv1connect.LogServiceListTopicsProcedure, "application/json", bytes.NewReader([]byte("{}")))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "unauthenticated") {
		t.Errorf("JSON POST: %d %s, want 401 unauthenticated", resp.StatusCode, body)
	}
	if m := e.metrics(); !strings.Contains(m, "logd_unauthenticated_requests_total 5") {
		t.Errorf("the metrics do not count the 5 refusals")
	}
}

// TestAuthNone: with Required off every call is allowed, and a credential
// given still names the principal (a bad one is still refused).
func TestAuthNone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := newAuthEnv(t, ctx, envConfig{mod: func(o *server.Options) { o.Auth.Required = false }})
	anon := e.client("")
	if got, err := whoami(ctx, anon); err != nil || got != "User:ANONYMOUS none" {
		t.Errorf("anonymous: %q, %v", got, err)
	}
	if _, err := anon.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "t", Partitions: 1})); err != nil {
		t.Errorf("anonymous create: %v", err)
	}
	bob := e.user(ctx, "bob")
	if got, err := whoami(ctx, e.client(bob)); err != nil || got != "User:bob token" {
		t.Errorf("with a token: %q, %v", got, err)
	}
	if _, err := e.client(bob).DeleteTopic(ctx, connect.NewRequest(&logdv1.DeleteTopicRequest{Name: "t"})); err != nil {
		t.Errorf("bob without ACLs: %v", err)
	}
	if _, err := whoami(ctx, e.client("logd_0123456789abcdef.x")); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("a bad token: %v, want UNAUTHENTICATED", err)
	}
	lines := e.auditLines()
	if len(lines) != 2 || lines[0]["principal"] != "User:ANONYMOUS" || lines[1]["principal"] != "User:bob" {
		t.Errorf("audit lines %v, want the creation by anonymous and the deletion by bob", lines)
	}
}
