package server_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/server"
)

// get fetches path with token ("" for none).
func (e *authEnv) get(path, token string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.url+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e.hs.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestOpsEndpointsNeedDescribeCluster: with auth required, /metrics,
// /healthz and /readyz answer principals with describe on the cluster,
// unless they are public.
func TestOpsEndpointsNeedDescribeCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := newAuthEnv(t, ctx, envConfig{})
	ops := e.user(ctx, "ops", allow("User:ops", auth.ResourceCluster, auth.PatternLiteral, auth.ClusterName, auth.OpDescribe))
	dev := e.user(ctx, "dev", allow("User:dev", auth.ResourceTopic, auth.PatternLiteral, "*", auth.OpAll))
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		for _, tc := range []struct {
			who, token string
			want       int
		}{
			{"anonymous", "", http.StatusUnauthorized},
			{"a bad token", "logd_0123456789abcdef.x", http.StatusUnauthorized},
			{"without describe cluster", dev, http.StatusForbidden},
			{"with describe cluster", ops, http.StatusOK},
			{"a superuser", e.admin, http.StatusOK},
		} {
			if code, body := e.get(path, tc.token); code != tc.want {
				t.Errorf("%s by %s: %d %s, want %d", path, tc.who, code, body, tc.want)
			}
		}
	}
	public := newAuthEnv(t, ctx, envConfig{mod: func(o *server.Options) { o.Auth.MetricsPublic = true }})
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		if code, body := public.get(path, ""); code != http.StatusOK {
			t.Errorf("public %s: %d %s", path, code, body)
		}
	}
}

// TestDenyAndPrefixEndToEnd: a prefix ACL covers the names that start
// with it and no other; a deny beats it; write implies describe, so the
// topic list shows what the principal may write.
func TestDenyAndPrefixEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := newAuthEnv(t, ctx, envConfig{})
	admin := e.client(e.admin)
	for _, name := range []string{"billing.invoices", "billing.secret", "billingx", "orders"} {
		if _, err := admin.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: name, Partitions: 1})); err != nil {
			t.Fatal(err)
		}
	}
	alice := e.client(e.user(ctx, "alice",
		allow("User:alice", auth.ResourceTopic, auth.PatternPrefix, "billing.", auth.OpWrite),
		deny("User:alice", auth.ResourceTopic, auth.PatternLiteral, "billing.secret", auth.OpWrite),
	))
	for _, tc := range []struct {
		topic string
		ok    bool
	}{
		{"billing.invoices", true},
		{"billing.secret", false},
		{"billingx", false},
		{"orders", false},
	} {
		_, err := alice.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: tc.topic, Records: []*logdv1.Record{{Value: []byte("v")}}}))
		switch {
		case tc.ok && err != nil:
			t.Errorf("produce to %s: %v", tc.topic, err)
		case !tc.ok && (connect.CodeOf(err) != connect.CodePermissionDenied || errorInfo(err).GetPermission() != "write topic "+tc.topic):
			t.Errorf("produce to %s: %v (%v), want PERMISSION_DENIED for write topic %s", tc.topic, err, errorInfo(err), tc.topic)
		}
	}
	r, err := alice.ListTopics(ctx, connect.NewRequest(&logdv1.ListTopicsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tp := range r.Msg.Topics {
		names = append(names, tp.Name)
	}
	// The deny of write leaves describe (implied by the prefix's write).
	if len(names) != 2 || names[0] != "billing.invoices" || names[1] != "billing.secret" {
		t.Errorf("alice lists %v, want billing.invoices and billing.secret", names)
	}
}
