package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/replication/catchup"
	"github.com/logd-dev/logd/replication/raftstore"
)

// runArgs runs logd's command line args as main does, with run as the
// node.
func runArgs(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	root := newRootCmd(getenv, io.Discard, stderr, run)
	root.SetArgs(defaultToRun(root, args))
	return root.ExecuteContext(ctx)
}

// parseFlags resolves the flags of logd run from args, getenv and the
// configuration file as logd does (newRootCmd, defaultToRun), and returns
// the config it would run a node with, running none.
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var got config
	root := newRootCmd(getenv, io.Discard, stderr, func(_ context.Context, c config, _ func(string) string, _ io.Writer) error {
		got = c
		return nil
	})
	root.SetArgs(defaultToRun(root, append([]string{"run"}, args...)))
	if err := root.ExecuteContext(context.Background()); err != nil {
		return config{}, err
	}
	return got, nil
}

// effectiveOf returns the value and source the configuration log gives
// the flag name.
func effectiveOf(t *testing.T, c config, name string) string {
	t.Helper()
	for i := 0; i+1 < len(c.effective); i += 2 {
		if c.effective[i] == name {
			return c.effective[i+1].(string)
		}
	}
	t.Fatalf("no %q in the effective configuration %v", name, c.effective)
	return ""
}

// writeConfig writes a configuration file and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "logd.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigPrecedence: a flag wins over its LOGD_* variable, which wins
// over the configuration file, which wins over the default; each value
// is logged with its source.
func TestConfigPrecedence(t *testing.T) {
	file := writeConfig(t, "data-dir: /from/file\nsnapshot-interval: 1m\nsuperuser: [alice, bob]\nmetrics-public: true\nmax-topics: 12\n")
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string // data-dir's value and source
	}{
		{name: "default", want: "./data (default)"},
		{name: "file", args: []string{"--config", file}, want: "/from/file (file)"},
		{name: "file from LOGD_CONFIG", env: map[string]string{"LOGD_CONFIG": file}, want: "/from/file (file)"},
		{name: "env over file", args: []string{"--config", file}, env: map[string]string{"LOGD_DATA_DIR": "/from/env"}, want: "/from/env (env)"},
		{name: "flag over env and file", args: []string{"--config", file, "--data-dir", "/from/flag"}, env: map[string]string{"LOGD_DATA_DIR": "/from/env"}, want: "/from/flag (flag)"},
		{name: "env without file", env: map[string]string{"LOGD_DATA_DIR": "/from/env"}, want: "/from/env (env)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseFlags(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if got := effectiveOf(t, c, "data-dir"); got != tc.want {
				t.Fatalf("data-dir: %q, want %q", got, tc.want)
			}
			if wantDir, _, _ := strings.Cut(tc.want, " "); c.dataDir != wantDir {
				t.Fatalf("config.dataDir %q, want %q", c.dataDir, wantDir)
			}
		})
	}
	// Typed values from the file: a duration, a list, a bool, an integer;
	// a flag still wins over the file's list.
	c, err := parseFlags([]string{"--config", file, "--superuser", "carol"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.snapshotPeriod != time.Minute || !c.authn.metricsPublic || c.limits.maxTopics != 12 || strings.Join(c.authn.superusers, ",") != "carol" {
		t.Fatalf("from the file: snapshot %v, metrics-public %v, max-topics %d, superusers %v", c.snapshotPeriod, c.authn.metricsPublic, c.limits.maxTopics, c.authn.superusers)
	}
	if got := effectiveOf(t, c, "snapshot-interval"); got != "1m0s (file)" {
		t.Fatalf("snapshot-interval: %q", got)
	}
}

// TestConfigFileRefusals: an unknown key, a list for a single-valued
// flag, a bad value or a missing file fails the start, naming the key.
func TestConfigFileRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{name: "unknown key", body: "data-dir: ./d\nlisten-addr: 127.0.0.1:1\n", want: `key "listen-addr": unknown key`},
		{name: "the file names itself", body: "config: other.yaml\n", want: `key "config": unknown key`},
		{name: "list for one value", body: "listen: [a, b]\n", want: `key "listen": want a single value`},
		{name: "bad duration", body: "snapshot-interval: soon\n", want: `key "snapshot-interval": invalid value "soon"`},
		{name: "a mapping", body: "listen:\n  host: a\n", want: `key "listen": want a scalar value`},
		{name: "not a mapping", body: "- a\n- b\n", want: "want a YAML mapping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFlags([]string{"--config", writeConfig(t, tc.body)}, noEnv, io.Discard)
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want a ConfigError with %q", err, tc.want)
			}
		})
	}
	if _, err := parseFlags([]string{"--config", filepath.Join(t.TempDir(), "none.yaml")}, noEnv, io.Discard); err == nil || !strings.Contains(err.Error(), "none.yaml") {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := parseFlags([]string{"--config", writeConfig(t, "")}, noEnv, io.Discard); err != nil {
		t.Fatalf("empty file: %v", err)
	}
	if _, err := parseFlags(nil, func(k string) string { return map[string]string{"LOGD_SNAPSHOT_INTERVAL": "soon"}[k] }, io.Discard); err == nil || !strings.Contains(err.Error(), "LOGD_SNAPSHOT_INTERVAL") {
		t.Fatalf("bad variable: %v", err)
	}
}

// TestOldSpellings: the command lines of the standard flag package's
// days (single dashes, -name=value, bare logd) still parse, with and
// without the run command.
func TestOldSpellings(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		dir  string
		err  string
	}{
		{name: "bare logd", dir: "./data"},
		{name: "single dash", args: []string{"-data-dir", "x1", "-listen", "127.0.0.1:7080", "-pprof", "-superuser", "a", "-superuser", "b", "-raft-heartbeat-timeout", "2s"}, dir: "x1"},
		{name: "single dash with =", args: []string{"-data-dir=x2", "-listen=127.0.0.1:7080", "-pprof=true"}, dir: "x2"},
		{name: "double dash", args: []string{"--data-dir", "x3"}, dir: "x3"},
		{name: "run command", args: []string{"run", "-data-dir", "x4"}, dir: "x4"},
		{name: "negative value", args: []string{"-data-dir", "x5", "--http-idle-timeout", "-1s"}, err: "--http-idle-timeout"},
		{name: "unknown flag", args: []string{"-no-such-flag", "1"}, err: "unknown"},
		{name: "stray argument", args: []string{"run", "extra"}, err: "extra"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *config
			root := newRootCmd(noEnv, io.Discard, io.Discard, func(_ context.Context, c config, _ func(string) string, _ io.Writer) error {
				got = &c
				return nil
			})
			root.SetArgs(defaultToRun(root, tc.args))
			err := root.Execute()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil || got == nil {
				t.Fatalf("%v (ran: %v)", err, got != nil)
			}
			if got.dataDir != tc.dir {
				t.Fatalf("data dir %q, want %q", got.dataDir, tc.dir)
			}
			if tc.name == "single dash" && (got.listen != "127.0.0.1:7080" || !got.pprof || len(got.authn.superusers) != 2 || got.raftHeartbeat != 2*time.Second) {
				t.Fatalf("single dash: %+v", got)
			}
		})
	}
}

// TestConfigLogRedacts: the configuration logged at start shows file
// paths but never a token file's contents or a URL's password.
func TestConfigLogRedacts(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok-s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	// The start fails on the missing certificate, after the log line.
	err := runArgs(context.Background(), []string{"--bootstrap-token-file", tokenFile, "--join", "https://admin:pw-s3cr3t@127.0.0.1:7070",
		"--tls-cert", "/nonexistent/n1.crt", "--tls-key", "/nonexistent/n1.key", "--data-dir", t.TempDir()}, noEnv, &stderr)
	if err == nil {
		t.Fatal("run: want the missing certificate")
	}
	out := stderr.String()
	if !strings.Contains(out, "msg=configuration") || !strings.Contains(out, tokenFile) || !strings.Contains(out, "/nonexistent/n1.key (flag)") {
		t.Fatalf("no configuration line with the paths in:\n%s", out)
	}
	if strings.Contains(out, "s3cr3t") {
		t.Fatalf("a secret in the log:\n%s", out)
	}
}

// TestRaftLogStoreFlag: --raft-log-store comes from the flag, its
// variable or the file like every flag; empty leaves the choice to the
// data dir (replication.Config.RaftLogStore), and another name is refused.
func TestRaftLogStoreFlag(t *testing.T) {
	file := writeConfig(t, "raft-log-store: boltdb\n")
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{want: ""},
		{args: []string{"--raft-log-store", "wal"}, want: "wal"},
		{env: map[string]string{"LOGD_RAFT_LOG_STORE": "boltdb"}, want: "boltdb"},
		{args: []string{"--config", file}, want: "boltdb"},
	} {
		c, err := parseFlags(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
		if err != nil || c.raftLogStore != tc.want {
			t.Errorf("%v %v: %q, %v; want %q", tc.args, tc.env, c.raftLogStore, err, tc.want)
		}
	}
	if _, err := parseFlags([]string{"--raft-log-store", "rocksdb"}, noEnv, io.Discard); err == nil || !strings.Contains(err.Error(), "--raft-log-store") {
		t.Errorf("--raft-log-store rocksdb: %v", err)
	}
}

// TestRaftWALSegmentSizeFlag: the segment size defaults to raft-wal's
// own, is read like every flag, and a size outside the bounds is refused
// before anything starts.
func TestRaftWALSegmentSizeFlag(t *testing.T) {
	c, err := parseFlags(nil, noEnv, io.Discard)
	if err != nil || c.walSegmentBytes != raftstore.DefaultWALSegmentBytes {
		t.Fatalf("default: %d, %v; want %d", c.walSegmentBytes, err, raftstore.DefaultWALSegmentBytes)
	}
	c, err = parseFlags(nil, func(k string) string {
		if k == "LOGD_RAFT_WAL_SEGMENT_SIZE" {
			return "1048576"
		}
		return ""
	}, io.Discard)
	if err != nil || c.walSegmentBytes != 1<<20 {
		t.Errorf("from the environment: %d, %v", c.walSegmentBytes, err)
	}
	for _, bad := range []string{"0", "65535", "-1", "1073741825"} {
		if _, err := parseFlags([]string{"--raft-wal-segment-size", bad}, noEnv, io.Discard); err == nil || !strings.Contains(err.Error(), "--raft-wal-segment-size") {
			t.Errorf("--raft-wal-segment-size %s: %v", bad, err)
		}
	}
}

// TestMoveBytesPerSecondFlag: the move budget defaults to
// catchup.DefaultMoveBytesPerSecond, is read like every flag, 0 is taken
// (unbounded), and a negative rate is refused before anything starts.
func TestMoveBytesPerSecondFlag(t *testing.T) {
	file := writeConfig(t, "move-bytes-per-second: 1048576\n")
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want int64
	}{
		{name: "default", want: catchup.DefaultMoveBytesPerSecond},
		{name: "flag", args: []string{"--move-bytes-per-second", "0"}, want: 0},
		{name: "environment", env: map[string]string{"LOGD_MOVE_BYTES_PER_SECOND": "200000000"}, want: 200_000_000},
		{name: "file", args: []string{"--config", file}, want: 1 << 20},
	} {
		c, err := parseFlags(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
		if err != nil || c.moveRate != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.name, c.moveRate, err, tc.want)
		}
	}
	if _, err := parseFlags([]string{"--move-bytes-per-second", "-1"}, noEnv, io.Discard); err == nil || !strings.Contains(err.Error(), "--move-bytes-per-second") {
		t.Errorf("--move-bytes-per-second -1: %v", err)
	}
}
