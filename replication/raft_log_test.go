package replication

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/internal/syncbuf"
)

// lockedBuffer is a bytes.Buffer safe for the node's writers and the test.
type lockedBuffer = syncbuf.Buffer

// TestRaftLinesInNodeFormat: with a JSON handler, every line a node on
// disk writes, hashicorp/raft's included (its transport, snapshot store
// and elections), is JSON, and Raft's carry logger "raft". Raft logging
// to its own hclog output instead leaves no "raft" line here (and text
// on stderr).
func TestRaftLinesInNodeFormat(t *testing.T) {
	var out lockedBuffer
	n, err := Open(Config{NodeID: "n1", DataDir: t.TempDir(), RaftBind: "127.0.0.1:0", Bootstrap: true, RaftLogLevel: "info",
		Logger: slog.New(slog.NewJSONHandler(&out, nil)), CleanerInterval: time.Hour, Fatal: func(err error) { t.Errorf("fatal: %v", err) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for !n.Ready() {
		select {
		case <-ctx.Done():
			t.Fatal("not ready")
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := n.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	raftLines := 0
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("not JSON: %q", line)
			continue
		}
		if m["logger"] == "raft" {
			raftLines++
		}
	}
	if raftLines == 0 {
		t.Errorf("no line of Raft's among:\n%s", out.String())
	}
}
