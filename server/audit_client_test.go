package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/server"
)

// TestAuditNamesTheConsole: a call that says it came from the web console
// (server.ClientHeader) has client "console" in its audit line, refused or
// not; a call without the header, or with a value the server does not
// know, has no client.
func TestAuditNamesTheConsole(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := newAuthEnv(t, ctx, envConfig{})
	bob := e.user(ctx, "bob")
	call := func(header string, token string) {
		h := http.Header{}
		if header != "" {
			h.Set(server.ClientHeader, header)
		}
		c := e.client(token, connect.WithInterceptors(withHeader(h)))
		_, _ = c.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "t", Partitions: 1}))
	}
	call("console", bob) // refused: bob has no ACL
	call("console", "")  // refused before decoding: no credentials
	call("", bob)
	call("<script>", bob)
	lines := e.auditLines()
	want := []struct{ client, outcome string }{
		{"console", "permission_denied"}, {"console", "unauthenticated"}, {"", "permission_denied"}, {"", "permission_denied"},
	}
	if len(lines) != len(want) {
		t.Fatalf("audit lines %v, want %d", lines, len(want))
	}
	for i, w := range want {
		got, _ := lines[i]["client"].(string)
		if got != w.client || lines[i]["outcome"] != w.outcome {
			t.Errorf("line %d: client %q, outcome %v; want %q, %s (%v)", i, got, lines[i]["outcome"], w.client, w.outcome, lines[i])
		}
	}
}
