package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// TestJSONLogsEveryLine: with --log-format json every line a node writes
// is one JSON object, hashicorp/raft's included (internal/slogbridge): a
// three-node cluster forms, a follower is killed so the leader's Raft
// logs its failed contacts, and the cluster stops. Raft's lines carry
// logger "raft".
func TestJSONLogsEveryLine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newCluster(t, 3, "--log-format", "json")
	leader := c.leader(ctx)
	var victim *node
	for _, nd := range c.nodes {
		if nd != leader {
			victim = nd
			break
		}
	}
	victim.kill()
	// The leader's Raft warns once its heartbeats to the dead follower
	// fail (every 300 ms by default; its backoff keeps the lines few).
	raftLines := func(nd *node) int {
		b, err := os.ReadFile(nd.logs.Name())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, line := range strings.Split(string(b), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["logger"] == "raft" {
				n++
			}
		}
		return n
	}
	waitFor(t, ctx, "a Raft line on the leader", func() bool { return raftLines(leader) > 0 })
	for _, nd := range c.nodes {
		nd.stop()
	}
	for _, nd := range c.nodes {
		b, err := os.ReadFile(nd.logs.Name())
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Errorf("%s line %d is not JSON: %q", nd.id, i+1, line)
			}
		}
	}
}
