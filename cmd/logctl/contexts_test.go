package main

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestContexts: contexts are added, listed, used and removed in the
// user's config dir; a call uses the current context (its server and
// token file), a flag or variable wins over it, a server given without
// --context does not get the context's credentials, and the file never
// holds the token itself.
func TestContexts(t *testing.T) {
	config := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", config)
	srv, adminToken := secureNode(t, nil)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "admin.token")
	writeFile(t, tokenFile, []byte(adminToken+"\n"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	// Relative file names are stored absolute.
	t.Chdir(dir)
	const admin = `(?m)^Principal:\s+User:admin$`

	steps := []struct {
		args     string
		env      map[string]string
		wantCode int
		stdout   []string
		stderr   []string
	}{
		{args: "context list", stdout: []string{`^CURRENT\s+NAME\s+SERVER\s+TLS CA\s+CLIENT CERT\s+TOKEN FILE\s+DESCRIPTION\n$`}, stderr: []string{`no contexts in .*contexts.json`}},
		{args: "context list -o json", stdout: []string{`^\[\]\n$`}},
		{args: "whoami --max-retry-time 0", env: map[string]string{"LOGCTL_SERVER": srv.Addr()}, wantCode: 6},
		{args: "context add prod --server " + srv.Addr() + " --token-file admin.token --description main", stdout: []string{`^added context prod \(current\): 127.0.0.1:\d+\n$`}},
		{args: "context add prod --server " + down, wantCode: 1, stderr: []string{`context "prod" exists; --force replaces it`}},
		{args: "context add bad --server " + down + " --token " + adminToken, wantCode: 2, stderr: []string{`a context holds a token file, never the token`}},
		{args: "context add bad --server " + down + " --token-file nope", wantCode: 2, stderr: []string{`--token-file: open .*nope: no such file`}},
		{args: "context add bad --token-file admin.token", wantCode: 2, stderr: []string{`context add needs --server`}},
		{args: "context add 'bad name' --server x", wantCode: 2},
		{args: "context add other --server " + down},
		{args: "context list", stdout: []string{`(?m)^\*\s+prod\s+127.0.0.1:\d+\s+-\s+-\s+` + regexp.QuoteMeta(tokenFile) + `\s+main$`, `(?m)^\s+other\s+127.0.0.1:\d+\s+-\s+-\s+-\s+-$`}},
		{args: "context list -o yaml", stdout: []string{`(?m)^- name: prod\n  current: true\n  server: "?127.0.0.1:\d+"?\n  token_file: "?` + regexp.QuoteMeta(tokenFile)}},
		// The current context gives the server and the token.
		{args: "whoami", stdout: []string{admin}},
		// A variable wins over the context.
		{args: "whoami --max-retry-time 0", env: map[string]string{"LOGCTL_TOKEN": "logd_bad.bad"}, wantCode: 6},
		// A server given without --context is another cluster: no
		// credentials of the current context go there.
		{args: "whoami --max-retry-time 0 --server " + srv.Addr(), wantCode: 6, stderr: []string{`authentication required`}},
		{args: "whoami --max-retry-time 0", env: map[string]string{"LOGCTL_SERVER": srv.Addr()}, wantCode: 6},
		// A named context with a --server: that node, the context's token.
		{args: "whoami --context prod --server " + srv.Addr(), stdout: []string{admin}},
		{args: "whoami --context other --max-retry-time 0", wantCode: 4},
		{args: "whoami --max-retry-time 0", env: map[string]string{"LOGCTL_CONTEXT": "other"}, wantCode: 4},
		{args: "whoami --context nope", wantCode: 3, stderr: []string{`^logctl: --context: context "nope": no such context \(there are: other, prod\)\n$`}},
		{args: "context use nope", wantCode: 3},
		{args: "__complete context use ''", stdout: []string{`^other\nprod\n:4\n`}},
		{args: "__complete whoami --context ''", stdout: []string{`^other\nprod\n:4\n`}},
		{args: "context use other", stdout: []string{`^current context: other \(127.0.0.1:\d+\)\n$`}},
		{args: "whoami --max-retry-time 0", wantCode: 4},
		{args: "context add prod --server " + srv.Addr() + " --token-file admin.token --force --use", stdout: []string{`added context prod \(current\)`}},
		{args: "whoami", stdout: []string{admin}},
		{args: "context remove prod", stdout: []string{`^removed context prod; no context is current now\n$`}},
		{args: "context remove prod", wantCode: 3},
		{args: "context list -o json", stdout: []string{`"name": "other",\s+"current": false,`}},
	}
	for i, s := range steps {
		r := runCLIEnv(t, s.env, shellWords(s.args)...)
		if r.code != s.wantCode {
			t.Fatalf("step %d: logctl %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", i, s.args, r.code, s.wantCode, r.stdout, r.stderr)
		}
		for _, p := range s.stdout {
			if !regexp.MustCompile(p).MatchString(r.stdout) {
				t.Fatalf("step %d: logctl %s: stdout does not match %q:\n%s", i, s.args, p, r.stdout)
			}
		}
		for _, p := range s.stderr {
			if !regexp.MustCompile(p).MatchString(r.stderr) {
				t.Fatalf("step %d: logctl %s: stderr does not match %q:\n%s", i, s.args, p, r.stderr)
			}
		}
	}

	path := filepath.Join(config, "logctl", contextsFileName)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, secret, _ := strings.Cut(adminToken, ".")
	if strings.Contains(string(b), secret) {
		t.Fatalf("the contexts file holds the token's secret:\n%s", b)
	}
}

// TestContextsFileChecked: a contexts file with a token in it, or other
// fields logctl does not know, is refused rather than half used.
func TestContextsFileChecked(t *testing.T) {
	config := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", config)
	path := filepath.Join(config, "logctl", contextsFileName)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ file, stderr string }{
		{file: `{"current":"a","contexts":{"a":{"server":"127.0.0.1:1","token":"logd_x.y"}}}`, stderr: `unknown field "token"`},
		{file: `{"current":"b","contexts":{"a":{"server":"127.0.0.1:1"}}}`, stderr: `the current context "b" is not in it`},
		{file: `{"contexts":{"a":{}}}`, stderr: `context "a" has no server`},
	} {
		writeFile(t, path, []byte(tt.file))
		r := runCLIEnv(t, nil, "whoami")
		if r.code != 1 || !strings.Contains(r.stderr, tt.stderr) {
			t.Errorf("file %s: exit %d, stderr %q; want 1 and %q", tt.file, r.code, r.stderr, tt.stderr)
		}
	}
}
