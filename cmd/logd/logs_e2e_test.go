package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/internal/e2e"
	"github.com/logd-dev/logd/server"
)

// TestJSONLogsEveryLine: with --log-format json every line a node writes
// is one JSON object, hashicorp/raft's included (internal/slogbridge): a
// three-node cluster forms, a follower is killed so the leader's Raft
// logs its failed contacts, and the cluster stops. Raft's lines carry
// logger "raft". On the way, a call to a follower carries its request id
// to the leader's log line (server/request_id.go).
func TestJSONLogsEveryLine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := e2e.NewCluster(t, 3, "--log-format", "json")
	leader := c.Leader(ctx)
	var victim *e2e.Node
	for _, nd := range c.Nodes {
		if nd != leader {
			victim = nd
			break
		}
	}
	// A call to a follower is forwarded with its request id: the answer
	// echoes it once, and the leader's line for the call carries it.
	req := connect.NewRequest(&logdv1.CreateTopicRequest{Name: "traced", Partitions: 1})
	req.Header().Set(server.RequestIDHeader, "e2e-forwarded-1")
	resp, err := victim.RPC.CreateTopic(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header().Values(server.RequestIDHeader); len(got) != 1 || got[0] != "e2e-forwarded-1" {
		t.Errorf("forwarded call answered %s %q, want [e2e-forwarded-1]", server.RequestIDHeader, got)
	}
	e2e.WaitFor(t, ctx, "the leader's line with the request id", func() bool {
		b, err := os.ReadFile(leader.Logs.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["request_id"] == "e2e-forwarded-1" && m["msg"] == "topic created" {
				return true
			}
		}
		return false
	})
	victim.Kill()
	// The leader's Raft warns once its heartbeats to the dead follower
	// fail (every 300 ms by default; its backoff keeps the lines few).
	raftLines := func(nd *e2e.Node) int {
		b, err := os.ReadFile(nd.Logs.Name())
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
	e2e.WaitFor(t, ctx, "a Raft line on the leader", func() bool { return raftLines(leader) > 0 })
	for _, nd := range c.Nodes {
		nd.Stop()
	}
	for _, nd := range c.Nodes {
		b, err := os.ReadFile(nd.Logs.Name())
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Errorf("%s line %d is not JSON: %q", nd.ID, i+1, line)
			}
		}
	}
}
