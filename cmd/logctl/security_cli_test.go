package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/internal/testcerts"
	"github.com/logd-dev/logd/logdtest"
	"github.com/logd-dev/logd/server"
)

// secureNode starts a node that requires authentication, over TLS when
// tlsConf is set, and returns it with its bootstrap token (User:admin, a
// superuser).
func secureNode(t *testing.T, tlsConf *tls.Config) (*logdtest.Server, string) {
	t.Helper()
	boot, err := auth.NewToken(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srv := logdtest.Start(t, logdtest.Options{Auth: server.AuthOptions{Required: true, BootstrapToken: &boot}, TLS: tlsConf})
	return srv, boot.String()
}

// mustRunEnv runs logctl against srv with env and fails the test unless it
// exits 0.
func mustRunEnv(t *testing.T, srv *logdtest.Server, env map[string]string, args ...string) cliResult {
	t.Helper()
	full := map[string]string{"LOGCTL_SERVER": srv.Addr()}
	for k, v := range env {
		full[k] = v
	}
	r := runCLIEnv(t, full, args...)
	if r.code != 0 {
		t.Fatalf("logctl %s: exit %d, stderr:\n%s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r
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

// secStep is one logctl invocation of a security script. In args and
// patterns, {name} stands for a value captured by an earlier step.
type secStep struct {
	args     string
	env      map[string]string // on top of LOGCTL_SERVER
	wantCode int
	stdout   []string // patterns stdout must match
	stderr   []string // patterns stderr must match
	// calls, if set, are how many calls of each method the node must
	// have had during the step.
	calls map[string]int
	// capture names the first submatch of a pattern on stdout.
	capture map[string]string
}

// runSecScript runs steps against srv, each with LOGCTL_SERVER set to it.
func runSecScript(t *testing.T, srv *logdtest.Server, steps []secStep) {
	t.Helper()
	vars := map[string]string{}
	expand := func(s string, quote bool) string {
		for k, v := range vars {
			if quote {
				v = regexp.QuoteMeta(v)
			}
			s = strings.ReplaceAll(s, "{"+k+"}", v)
		}
		return s
	}
	for i, s := range steps {
		env := map[string]string{"LOGCTL_SERVER": srv.Addr()}
		for k, v := range s.env {
			env[k] = expand(v, false)
		}
		before := map[string]int{}
		for m := range s.calls {
			before[m] = srv.Calls(m)
		}
		args := expand(s.args, false)
		r := runCLIEnv(t, env, strings.Fields(args)...)
		where := fmt.Sprintf("step %d: logctl %s", i, args)
		if r.code != s.wantCode {
			t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", where, r.code, s.wantCode, r.stdout, r.stderr)
		}
		for name, p := range s.capture {
			m := regexp.MustCompile(p).FindStringSubmatch(r.stdout)
			if m == nil {
				t.Fatalf("%s: stdout has nothing for %s (%q):\n%s", where, name, p, r.stdout)
			}
			vars[name] = m[1]
		}
		for _, p := range s.stdout {
			if p = expand(p, true); !regexp.MustCompile(p).MatchString(r.stdout) {
				t.Fatalf("%s: stdout does not match %q:\n%s", where, p, r.stdout)
			}
		}
		for _, p := range s.stderr {
			if p = expand(p, true); !regexp.MustCompile(p).MatchString(r.stderr) {
				t.Fatalf("%s: stderr does not match %q:\n%s", where, p, r.stderr)
			}
		}
		if s.wantCode != 0 && strings.Count(r.stderr, "\n") != 1 {
			t.Fatalf("%s: want one error line on stderr, got:\n%s", where, r.stderr)
		}
		for m, n := range s.calls {
			if got := srv.Calls(m) - before[m]; got != n {
				t.Fatalf("%s: %d %s calls, want %d", where, got, m, n)
			}
		}
	}
}

func TestCLITokens(t *testing.T) {
	srv, boot := secureNode(t, nil)
	admin := map[string]string{"LOGCTL_TOKEN": boot}
	alice := map[string]string{"LOGCTL_TOKEN": "{alice}"}
	const when = `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`
	runSecScript(t, srv, []secStep{
		{args: "whoami", env: admin, stdout: []string{`(?m)^Principal:\s+User:admin$`, `(?m)^Authenticated by:\s+bootstrap-token$`, `(?m)^Superuser:\s+yes$`, `(?m)^Auth required:\s+yes$`}},
		{args: "whoami -o json", env: admin, stdout: []string{`"principal": "User:admin"`, `"method": "bootstrap-token"`, `"superuser": true`, `"auth_required": true`}},
		{args: "token create --principal alice --description billing --ttl 720h", env: admin,
			stdout: []string{`^logd_[0-9a-f]{16}\.\S+\n$`}, capture: map[string]string{"alice": `^(\S+)\n`, "id": `^logd_([0-9a-f]{16})\.`},
			stderr: []string{`^logctl: created token {id} for User:alice \(expires ` + when + `\); it will not be shown again: store it now\n$`}},
		{args: "token create --principal User:bob -o json", env: admin, stdout: []string{`"token": "logd_[0-9a-f]{16}\.\S+"`, `"principal": "User:bob"`, `"created_by": "User:admin"`},
			stderr: []string{`\(does not expire\); it will not be shown again`}},
		{args: "token list", env: admin, stdout: []string{
			`(?m)^ID\s+PRINCIPAL\s+DESCRIPTION\s+CREATED\s+EXPIRES\s+CREATED BY$`,
			`(?m)^{id}\s+User:alice\s+billing\s+` + when + `\s+` + when + `\s+User:admin$`,
			`(?m)^[0-9a-f]{16}\s+User:bob\s+-\s+` + when + `\s+never\s+User:admin$`}},
		{args: "token list --principal User:alice -o json", env: admin, stdout: []string{`(?s)^\[\s*\{\s*"id": "{id}",[^{]*\}\s*\]\n$`}},
		{args: "token list --principal nobody -o json", env: admin, stdout: []string{`^\[\]\n$`}},
		{args: "whoami", env: alice, stdout: []string{`(?m)^Principal:\s+User:alice$`, `(?m)^Authenticated by:\s+token$`, `(?m)^Superuser:\s+no$`}},
		{args: "--token {alice} whoami", stdout: []string{`(?m)^Principal:\s+User:alice$`}},
		{args: "token revoke {id}", env: admin, stdout: []string{`^revoked token {id} of User:alice\n$`}},
		{args: "token revoke {id}", env: admin, wantCode: 3, stderr: []string{`^logctl: revoke token {id}: .*unknown token`}},
		{args: "whoami", env: alice, wantCode: 6, calls: map[string]int{"WhoAmI": 1},
			stderr: []string{`^logctl: not authenticated: token {id} is invalid, expired or revoked \(give a token with --token-file, --token or LOGCTL_TOKEN, or a client certificate with --tls-cert and --tls-key\)\n$`}},
		{args: "token list -o json", wantCode: 6, calls: map[string]int{"ListTokens": 1}, stderr: []string{`^\{"error":\{"code":6,"reason":"UNAUTHENTICATED","message":"list tokens: not authenticated: authentication required`}},
		{args: "token create", env: admin, wantCode: 2, calls: map[string]int{"CreateToken": 0}, stderr: []string{`required flag\(s\) "principal" not set`}},
		{args: "token create --principal x --ttl -1h", env: admin, wantCode: 2, calls: map[string]int{"CreateToken": 0}, stderr: []string{`--ttl -1h0m0s is negative`}},
		{args: "token create --principal two,names", env: admin, wantCode: 1, stderr: []string{`invalid argument|invalid principal`}},
	})
}

func TestCLIACLs(t *testing.T) {
	srv, boot := secureNode(t, nil)
	admin := map[string]string{"LOGCTL_TOKEN": boot}
	for _, topic := range []string{"orders", "audit", "ordinals"} {
		mustRunEnv(t, srv, admin, "topic", "create", topic)
	}
	runSecScript(t, srv, []secStep{
		{args: "acl add --principal alice --topic ord --prefix --operation read,write --dry-run", env: admin, calls: map[string]int{"ListTopics": 1, "CreateACLs": 0},
			stdout: []string{`(?m)^PRINCIPAL\s+EFFECT\s+OPERATION\s+RESOURCE\s+PATTERN\s+NAME$`, `(?m)^User:alice\s+allow\s+read\s+topic\s+prefix\s+ord$`, `(?m)^User:alice\s+allow\s+write\s+topic\s+prefix\s+ord$`,
				`(?m)^Existing topics matched \(2\): orders, ordinals$`},
			stderr: []string{`dry run: nothing changed; run without --dry-run to add 2 ACLs`}},
		{args: "acl add --principal alice --topic * --operation read --dry-run -o json", env: admin,
			stdout: []string{`"dry_run": true`, `"created": 0`, `(?s)"matching_topics": \[\s*"audit",\s*"orders",\s*"ordinals"\s*\]`}},
		{args: "acl add --principal ops --cluster --operation admin --dry-run -o json", env: admin, calls: map[string]int{"ListTopics": 0, "CreateACLs": 0},
			stdout: []string{`"name": "logd"`, `"matching_topics": \[\]`}},
		{args: "acl list -o json", env: admin, stdout: []string{`^\[\]\n$`}},
		{args: "acl add --principal alice --topic ord --prefix --operation read,write", env: admin, calls: map[string]int{"CreateACLs": 1},
			stderr: []string{`^logctl: added 2 ACLs \(2 new\)\n$`}},
		{args: "acl add --principal alice,* --topic ord --prefix --operation read --deny", env: admin, stderr: []string{`added 2 ACLs \(2 new\)`}},
		{args: "acl add --principal alice --topic ord --prefix --operation write -o json", env: admin, stdout: []string{`"created": 0`}},
		{args: "acl add --principal Node:n1 --token-for bob --operation alter", env: admin},
		{args: "acl list", env: admin, stdout: []string{`(?m)^User:alice\s+allow\s+read\s+topic\s+prefix\s+ord$`, `(?m)^\*\s+deny\s+read\s+topic\s+prefix\s+ord$`, `(?m)^Node:n1\s+allow\s+alter\s+token\s+literal\s+bob$`}},
		{args: "acl list --deny -o json", env: admin, stdout: []string{`"principal": "User:alice"`, `"principal": "\*"`}},
		{args: "acl list --resource token", env: admin, stdout: []string{`(?m)^Node:n1\s+allow\s+alter\s+token\s+literal\s+bob$`}},
		{args: "acl list --principal nobody -o json", env: admin, stdout: []string{`^\[\]\n$`}},
		{args: "acl remove --principal alice --topic ord --prefix --operation write --dry-run", env: admin, calls: map[string]int{"DeleteACLs": 1},
			stdout: []string{`(?m)^User:alice\s+allow\s+write\s+topic\s+prefix\s+ord$`}, stderr: []string{`dry run: nothing changed; run without --dry-run to remove 1 ACL\n$`}},
		{args: "acl list --principal alice --operation write", env: admin, stdout: []string{`(?m)^User:alice\s+allow\s+write\s+topic\s+prefix\s+ord$`}},
		{args: "acl remove --principal alice --deny", env: admin, calls: map[string]int{"DeleteACLs": 2},
			stdout: []string{`(?m)^User:alice\s+deny\s+read\s+topic\s+prefix\s+ord$`}, stderr: []string{`^logctl: removed 1 ACL\n$`}},
		{args: "acl remove --principal carol", env: admin, calls: map[string]int{"DeleteACLs": 1}, stderr: []string{`no ACL matches the filters; nothing removed`}},
		{args: "acl remove --resource token -o json", env: admin, stdout: []string{`"dry_run": false`, `"principal": "Node:n1"`}},
		{args: "acl list --resource token -o json", env: admin, stdout: []string{`^\[\]\n$`}},
		// Bad command lines change nothing and make no call.
		{args: "acl remove", env: admin, wantCode: 2, calls: map[string]int{"DeleteACLs": 0}, stderr: []string{`give at least one filter`}},
		{args: "acl add --principal alice --operation read", env: admin, wantCode: 2, calls: map[string]int{"CreateACLs": 0}, stderr: []string{`give the resource`}},
		{args: "acl add --principal alice --topic a --group b --operation read", env: admin, wantCode: 2, calls: map[string]int{"CreateACLs": 0}, stderr: []string{`give one resource, not --topic and --group`}},
		{args: "acl add --principal alice --topic a --operation read,fly", env: admin, wantCode: 2, calls: map[string]int{"CreateACLs": 0}, stderr: []string{`--operation "fly": want one of read, write`}},
		{args: "acl add --principal Group:x --topic a --operation read", env: admin, wantCode: 2, calls: map[string]int{"CreateACLs": 0}, stderr: []string{`--principal "Group:x"`}},
		{args: "acl add --principal alice --cluster --prefix --operation admin", env: admin, wantCode: 2, calls: map[string]int{"CreateACLs": 0}, stderr: []string{`--prefix does not apply to --cluster`}},
		{args: "acl add --principal alice --topic * --prefix --operation read", env: admin, wantCode: 2, calls: map[string]int{"CreateACLs": 0}, stderr: []string{`--prefix with name \*`}},
		{args: "acl add --principal alice --acl tpoic --operation read", env: admin, wantCode: 2, calls: map[string]int{"CreateACLs": 0}, stderr: []string{`--acl "tpoic": name a resource type`}},
		{args: "acl list --topic a --resource group", env: admin, wantCode: 2, calls: map[string]int{"ListACLs": 0}, stderr: []string{`give --resource or a resource flag`}},
		{args: "acl list --operation read,write", env: admin, wantCode: 2, calls: map[string]int{"ListACLs": 0}, stderr: []string{`a filter takes one operation`}},
		{args: "acl list --prefix --pattern literal", env: admin, wantCode: 2, calls: map[string]int{"ListACLs": 0}, stderr: []string{`--prefix and --pattern literal disagree`}},
		// A name the server refuses: nothing added.
		{args: "acl add --principal alice --topic bad\"name --operation read", env: admin, wantCode: 1, stderr: []string{`invalid`}},
		{args: "acl list --principal alice --resource topic -o json", env: admin, stdout: []string{`"name": "ord"`}},
	})
}

// TestCLIAuthRefusals: refusals exit 6 with one line that names what is
// missing, after exactly one call; the grant the line suggests works.
func TestCLIAuthRefusals(t *testing.T) {
	srv, boot := secureNode(t, nil)
	admin := map[string]string{"LOGCTL_TOKEN": boot}
	r := mustRunEnv(t, srv, admin, "token", "create", "--principal", "alice")
	alice := map[string]string{"LOGCTL_TOKEN": strings.TrimSpace(r.stdout)}

	r = runCLIEnv(t, map[string]string{"LOGCTL_SERVER": srv.Addr(), "LOGCTL_TOKEN": alice["LOGCTL_TOKEN"]}, "topic", "create", "orders")
	const want = `^logctl: permission denied: User:alice lacks "(\w+ \w+ \w+)" \(an administrator can grant it: logctl acl add (.*)\)\n$`
	m := regexp.MustCompile(want).FindStringSubmatch(r.stderr)
	if r.code != 6 || m == nil || srv.Calls("CreateTopic") != 1 {
		t.Fatalf("alice's topic create: exit %d after %d calls, stderr %q; want 6 after 1 call, matching %q", r.code, srv.Calls("CreateTopic"), r.stderr, want)
	}
	t.Logf("refusal: %s", strings.TrimSpace(r.stderr))
	// The grant the refusal suggests, then the call again.
	mustRunEnv(t, srv, admin, append([]string{"acl", "add"}, strings.Fields(m[2])...)...)
	if r := runCLIEnv(t, map[string]string{"LOGCTL_SERVER": srv.Addr(), "LOGCTL_TOKEN": alice["LOGCTL_TOKEN"]}, "topic", "create", "orders"); r.code != 0 {
		t.Fatalf("alice's topic create after the suggested grant: exit %d, stderr %q", r.code, r.stderr)
	}

	runSecScript(t, srv, []secStep{
		{args: "produce orders v", env: alice, wantCode: 6, calls: map[string]int{"Produce": 1},
			stderr: []string{`^logctl: permission denied: User:alice lacks "write topic orders" \(an administrator can grant it: logctl acl add --principal User:alice --topic orders --operation write\)\n$`}},
		{args: "produce orders v --idempotency-key k", env: alice, wantCode: 6, calls: map[string]int{"Produce": 1}},
		{args: "acl add --principal alice --topic orders --operation write", env: alice, wantCode: 6, calls: map[string]int{"CreateACLs": 1},
			stderr: []string{`^logctl: permission denied: User:alice lacks "alter acl topic" \(an administrator can grant it: logctl acl add --principal User:alice --acl topic --operation alter\)\n$`}},
		{args: "topic create audit", wantCode: 6, calls: map[string]int{"CreateTopic": 1}, stderr: []string{`^logctl: not authenticated: authentication required: .* \(give a token with`}},
		{args: "status", wantCode: 6, calls: map[string]int{"Status": 1}},
		{args: "topic create audit", env: admin, stdout: []string{`created topic audit`}},
	})
}

// TestCLIServerEnv: LOGCTL_SERVER, then LOGD_SERVER, then the default;
// --server wins over both.
func TestCLIServerEnv(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
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
		{name: "LOGCTL_SERVER", env: map[string]string{"LOGCTL_SERVER": srv.Addr()}, args: "whoami", want: 0},
		{name: "LOGD_SERVER as an alias", env: map[string]string{"LOGD_SERVER": srv.Addr()}, args: "whoami", want: 0},
		{name: "LOGCTL_SERVER wins over LOGD_SERVER", env: map[string]string{"LOGCTL_SERVER": srv.Addr(), "LOGD_SERVER": down}, args: "whoami", want: 0},
		{name: "--server wins over both", env: map[string]string{"LOGCTL_SERVER": down, "LOGD_SERVER": down}, args: "whoami --server " + srv.Addr(), want: 0},
		{name: "LOGCTL_SERVER down", env: map[string]string{"LOGCTL_SERVER": down, "LOGD_SERVER": srv.Addr()}, args: "whoami --max-retry-time 0", want: 4},
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
	srv, adminToken := secureNode(t, nil)
	dir := t.TempDir()
	file := filepath.Join(dir, "admin.token")
	writeFile(t, file, []byte(adminToken+"\n"))
	empty := filepath.Join(dir, "empty")
	writeFile(t, empty, nil)
	const admin = `(?m)^Principal:\s+User:admin$`
	none := map[string]int{"WhoAmI": 0}
	runSecScript(t, srv, []secStep{
		{args: "whoami --token " + adminToken, stdout: []string{admin}},
		{args: "whoami --token-file " + file, stdout: []string{admin}},
		{args: "whoami", env: map[string]string{"LOGCTL_TOKEN_FILE": file}, stdout: []string{admin}},
		{args: "whoami", env: map[string]string{"LOGCTL_TOKEN": adminToken}, stdout: []string{admin}},
		// A flag wins over the variables, both of them.
		{args: "whoami --token-file " + file, env: map[string]string{"LOGCTL_TOKEN": "logd_bad.bad"}, stdout: []string{admin}},
		{args: "whoami", env: map[string]string{"LOGD_TOKEN": adminToken}, wantCode: 6, stderr: []string{`authentication required`}},
		{args: "whoami --token x --token-file " + file, wantCode: 2, calls: none, stderr: []string{`give --token or --token-file, not both`}},
		{args: "whoami", env: map[string]string{"LOGCTL_TOKEN": "x", "LOGCTL_TOKEN_FILE": file}, wantCode: 2, calls: none, stderr: []string{`give LOGCTL_TOKEN or LOGCTL_TOKEN_FILE, not both`}},
		{args: "whoami --token-file " + empty, wantCode: 2, calls: none, stderr: []string{`--token-file .* is empty`}},
		{args: "whoami --token-file " + filepath.Join(dir, "nope"), wantCode: 2, calls: none, stderr: []string{`--token-file: open .*no such file`}},
		{args: "whoami", env: map[string]string{"LOGCTL_TOKEN": "two words"}, wantCode: 1, calls: none, stderr: []string{`token: character ' ' not allowed`}},
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
	srv, adminToken := secureNode(t, ca.OptionalClientConfig(node))
	host := srv.Addr()
	strict, _ := secureNode(t, ca.ServerConfig(node))
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
		{name: "https URL and a CA, no client certificate", args: fmt.Sprintf("whoami --server https://%s --tls-ca %s", host, caFile), want: 6, stderr: `^logctl: not authenticated: authentication required`},
		{name: "a token over TLS", args: fmt.Sprintf("whoami --server %s --tls-ca %s --token %s", host, caFile, adminToken), stdout: `(?m)^Principal:\s+User:admin$`},
		{name: "no client certificate where one is required", args: fmt.Sprintf("whoami --server %s --tls-ca %s", strict.Addr(), caFile), want: 6,
			stderr: `^logctl: not authenticated: the server refused the TLS client certificate: remote error: tls: certificate required \(the server requires a client certificate at the TLS layer.*\)\n$`},
		{name: "client certificate where one is required", args: fmt.Sprintf("whoami --server %s --tls-ca %s --tls-cert %s --tls-key %s", strict.Addr(), caFile, certFile, keyFile), stdout: `(?m)^Principal:\s+User:carol$`},
		{name: "server of another CA", args: fmt.Sprintf("whoami --server %s --tls-ca %s", host, otherCA), want: 1, stderr: `^logctl: whoami: tls: failed to verify certificate: x509: certificate signed by unknown authority`},
		{name: "plain HTTP to a TLS port", args: fmt.Sprintf("whoami --server %s", host), want: 1, stderr: `^logctl: \S+ answered this plain-HTTP call with 400 Bad Request, as a TLS port does: give --tls-ca, or an https:// --server\n$`},
		{name: "a token where a client certificate is required", args: fmt.Sprintf("whoami --server %s --tls-ca %s --token %s", strict.Addr(), caFile, adminToken), want: 6,
			stderr: `^logctl: not authenticated: the server refused the TLS client certificate: .*\(the server requires a client certificate at the TLS layer, before any token is read: give --tls-cert and --tls-key, or LOGCTL_TLS_CERT and LOGCTL_TLS_KEY\)\n$`},
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
