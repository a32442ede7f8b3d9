package slogbridge_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/logd-dev/logd/internal/slogbridge"
)

// lines parses every line of buf as JSON.
func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// TestHCLog: hclog's calls come out as slog JSON lines with their level,
// name, arguments (implied ones too) and formatted values; the bridge's
// level and the handler's both filter.
func TestHCLog(t *testing.T) {
	var buf bytes.Buffer
	h := slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slogbridge.LevelTrace})
	l := slogbridge.HCLog(h, "raft", hclog.Debug)
	l.Trace("hidden by the bridge's level")
	l.Debug("debug line", "k", 1)
	net := l.Named("net").With("peer", "n2")
	net.Warn("failed to contact", "err", "refused", "took", hclog.Fmt("%dms", 5))
	l.Error("odd", "lonely")
	l.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}).Print("[ERR] from a standard logger")
	if !l.IsDebug() || l.IsTrace() {
		t.Errorf("IsDebug %v IsTrace %v, want true false", l.IsDebug(), l.IsTrace())
	}
	if got := net.ImpliedArgs(); len(got) != 2 || got[0] != "peer" {
		t.Errorf("ImpliedArgs = %v", got)
	}

	got := lines(t, &buf)
	want := []map[string]any{
		{"level": "DEBUG", "msg": "debug line", "logger": "raft", "k": 1.0},
		{"level": "WARN", "msg": "failed to contact", "logger": "raft.net", "peer": "n2", "err": "refused", "took": "5ms"},
		{"level": "ERROR", "msg": "odd", "logger": "raft", "EXTRA_VALUE_AT_END": "lonely"},
		{"level": "ERROR", "msg": "from a standard logger", "logger": "raft"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), buf.String())
	}
	for i, w := range want {
		for k, v := range w {
			if got[i][k] != v {
				t.Errorf("line %d: %s = %v, want %v (%v)", i, k, got[i][k], v, got[i])
			}
		}
	}

	buf.Reset()
	quiet := slogbridge.HCLog(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}), "raft", hclog.Debug)
	quiet.Info("hidden by the handler's level")
	if quiet.IsInfo() || buf.Len() > 0 {
		t.Errorf("handler at warn: IsInfo %v, wrote %q", quiet.IsInfo(), buf.String())
	}
	off := slogbridge.HCLog(h, "raft", hclog.Off)
	off.Error("hidden: off")
	if buf.Len() > 0 {
		t.Errorf("level off wrote %q", buf.String())
	}
}

// TestBbolt: bbolt's lines come out at their level.
func TestBbolt(t *testing.T) {
	var buf bytes.Buffer
	b := slogbridge.Bbolt(slog.New(slog.NewJSONHandler(&buf, nil)).With("logger", "bbolt"))
	b.Errorf("Creating bucket %q failed: %v", "logs", "disk full")
	b.Debug("hidden")
	got := lines(t, &buf)
	if len(got) != 1 || got[0]["level"] != "ERROR" || got[0]["msg"] != `Creating bucket "logs" failed: disk full` || got[0]["logger"] != "bbolt" {
		t.Errorf("got %v", got)
	}
}
