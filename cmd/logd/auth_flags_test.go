package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logd-dev/logd/auth"
)

// TestAuthFlags: flags and LOGD_* names, refusals that name the flag, and
// the server options they make.
func TestAuthFlags(t *testing.T) {
	noEnv := func(string) string { return "" }
	c, err := parseFlags(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if a := c.authn; a.mode != authNone || len(a.superusers) != 0 || a.bootstrapFile != "" || a.metricsPublic || a.auditLog != "" || a.quotaProduce != 0 || a.quotaFetch != 0 {
		t.Fatalf("defaults: %+v", a)
	}
	c, err = parseFlags([]string{"--auth", "required", "--superuser", "alice", "--superuser", "Node:n1", "--metrics-public",
		"--quota-produce-bytes-per-second", "1000", "--quota-fetch-bytes-per-second", "2000"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	opts, closeAudit, err := c.authn.serverOptions(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	closeAudit()
	if !opts.Required || !opts.MetricsPublic || len(opts.Superusers) != 2 || opts.Superusers[0] != auth.User("alice") ||
		opts.Superusers[1] != (auth.Principal{Type: auth.TypeNode, Name: "n1"}) || opts.BootstrapToken != nil ||
		opts.Quotas.ProduceBytesPerSec != 1000 || opts.Quotas.FetchBytesPerSec != 2000 {
		t.Fatalf("options: %+v", opts)
	}
	env := map[string]string{"LOGD_AUTH": "required", "LOGD_SUPERUSERS": "a,b", "LOGD_QUOTA_FETCH_BYTES_PER_SECOND": "5", "LOGD_METRICS_PUBLIC": "true"}
	c, err = parseFlags(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil || c.authn.mode != authRequired || len(c.authn.superusers) != 2 || c.authn.quotaFetch != 5 || !c.authn.metricsPublic {
		t.Fatalf("environment: %+v, %v", c.authn, err)
	}
	for _, args := range [][]string{
		{"--auth", "maybe"},
		{"--quota-produce-bytes-per-second", "-1"},
		{"--quota-fetch-bytes-per-second", "fast"},
	} {
		if _, err := parseFlags(args, noEnv, io.Discard); err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(args[0], "--")) {
			t.Errorf("%v: %v, want an error naming the flag", args, err)
		}
	}
	c, err = parseFlags([]string{"--superuser", "Group:x"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.authn.serverOptions(slog.Default()); err == nil || !strings.Contains(err.Error(), "--superuser") {
		t.Errorf("a bad superuser: %v", err)
	}
}

// TestBootstrapTokenFile: a missing file gets a new token, readable by its
// owner only, and the log names the file but never the token; the next
// start reads the same token; a file that holds no token is refused.
func TestBootstrapTokenFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secrets", "bootstrap.token")
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	c := authConfig{mode: authRequired, bootstrapFile: path}
	opts, _, err := c.serverOptions(logger)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("the token file has mode %v, want 0600", st.Mode().Perm())
	}
	tok := opts.BootstrapToken
	if tok == nil || !strings.Contains(logs.String(), path) || strings.Contains(logs.String(), tok.Secret) {
		t.Fatalf("token %v; log %q: want the path, never the secret", tok, logs.String())
	}
	again, _, err := c.serverOptions(logger)
	if err != nil || *again.BootstrapToken != *tok {
		t.Fatalf("second start: %v, %v; want the same token", again.BootstrapToken, err)
	}
	bad := filepath.Join(dir, "bad.token")
	if err := os.WriteFile(bad, []byte("admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := (authConfig{bootstrapFile: bad}).serverOptions(logger); err == nil {
		t.Error("a file without a token was accepted")
	}
}

// TestAuditLogFile: --audit-log appends JSON lines.
func TestAuditLogFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(`{"earlier":"line"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, closeAudit, err := (authConfig{auditLog: path}).serverOptions(slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	opts.Audit.Info("audit", "procedure", "DeleteTopic")
	if err := closeAudit(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var m map[string]any
	if len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &m) != nil || m["procedure"] != "DeleteTopic" || m["msg"] != "audit" {
		t.Fatalf("audit file %q", b)
	}
}
