package console_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
	"github.com/logd-dev/logd/server"
)

// The console on a node that requires authentication: it asks for a
// token, shows the principal, shows a refusal as the API gave it and
// changes nothing, and the audit log names the principal and the console.

// authAudit collects a node's audit lines (JSON, one per line).
type authAudit struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (a *authAudit) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.b.Write(p)
}

// lines returns the audit lines of procedure, decoded.
func (a *authAudit) lines(t *testing.T, procedure string) []map[string]any {
	t.Helper()
	a.mu.Lock()
	text := a.b.String()
	a.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if m["procedure"] == procedure {
			out = append(out, m)
		}
	}
	return out
}

// authNode starts a node that requires a token; admin is its bootstrap
// token (a superuser).
func authNode(t *testing.T) (node *logdtest.Server, admin string, audit *authAudit) {
	t.Helper()
	boot, err := auth.NewToken(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	audit = &authAudit{}
	node = logdtest.Start(t, logdtest.Options{Auth: server.AuthOptions{Required: true, BootstrapToken: &boot,
		Audit: slog.New(slog.NewJSONHandler(audit, nil))}})
	return node, boot.String(), audit
}

// authLogin fills the console's login form with token.
func authLogin(p *page, token string) {
	p.t.Helper()
	p.waitText("#login", "Log in")
	tokJS, _ := json.Marshal(token)
	var ok bool
	p.eval(`(() => { const i = document.querySelector('#token'); i.value = `+string(tokJS)+`; i.form.requestSubmit(); return true; })()`, &ok)
}

// takeRefusals takes the errors the browser logged for the calls
// refused before login (401) or by the ACLs (403), and fails on others.
func (p *page) takeRefusals(statuses ...string) {
	p.t.Helper()
	for _, e := range p.takeErrors() {
		ok := false
		for _, s := range statuses {
			ok = ok || strings.Contains(e, "status of "+s)
		}
		if !ok {
			p.t.Errorf("the browser logged: %s", e)
		}
	}
}

func TestConsoleLoginRefusalAudit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node, admin, audit := authNode(t)
	c := dlqClient(t, node, admin)
	dlqFill(t, ctx, c, "a", "b")
	// alice may look at every topic, and write none: a redrive, which
	// writes, is refused.
	tok, err := c.CreateToken(ctx, client.CreateTokenRequest{Principal: "User:alice", Description: "console test"})
	if err != nil {
		t.Fatal(err)
	}
	var acls []client.ACL
	for _, op := range []string{"read", "describe"} {
		acls = append(acls, client.ACL{Principal: "User:alice", Resource: "topic", Pattern: "literal", Name: "*", Operation: op, Effect: "allow"})
	}
	if _, err := c.CreateACLs(ctx, acls); err != nil {
		t.Fatal(err)
	}

	p := newPage(t, node)
	p.open("/dlq/" + dlqTopic)
	authLogin(p, "logd_0123456789abcdef.wrong")
	p.waitText("#login", "invalid")
	authLogin(p, tok.Token)
	p.waitText("#whoami", "User:alice")
	p.waitRows(2)
	p.takeRefusals("401")

	p.click("#dlq-redrive-filtered")
	p.fill("#redrive-rate", "0")
	p.click("#redrive-start")
	p.click("#redrive-confirm-ok")
	p.waitText("#redrive-error", "permission_denied")
	p.takeRefusals("403")
	if jobs, err := c.ListRedrives(ctx, ""); err != nil || len(jobs) != 0 {
		t.Fatalf("jobs after a refused start: %+v, %v", jobs, err)
	}
	if end := dlqEnd(t, ctx, c, "orders"); end != 2 {
		t.Fatalf("orders holds %d records after a refused redrive, want 2", end)
	}

	// The administrator, logged in after alice, may.
	p.click("#logout")
	authLogin(p, admin)
	p.waitText("#whoami", "superuser")
	p.open("/dlq/" + dlqTopic)
	p.waitRows(2)
	p.click("#dlq-redrive-filtered")
	dlqStartRedrive(p)

	lines := audit.lines(t, "StartRedrive")
	want := []struct{ principal, outcome string }{{"User:alice", "permission_denied"}, {server.BootstrapPrincipal.String(), "ok"}}
	if len(lines) != len(want) {
		t.Fatalf("StartRedrive audit lines %v, want %d", lines, len(want))
	}
	for i, w := range want {
		if lines[i]["principal"] != w.principal || lines[i]["outcome"] != w.outcome || lines[i]["client"] != "console" {
			t.Errorf("audit line %d: %v; want principal %s, outcome %s, client console", i, lines[i], w.principal, w.outcome)
		}
	}
}
