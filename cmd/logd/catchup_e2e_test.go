package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/internal/e2e"
)

// TestClusterCatchUpAfterCompaction is T10 of docs/faults.md with the
// cleaner at work: a follower is offline while more than Raft's trailing
// logs are written to a compacted topic of tiny segments, and the cleaner
// then compacts segments that the leader's latest snapshot lists, with no
// write after it (so no snapshot is taken by count). Restarted, the follower
// must install a snapshot whose segments its peers still serve, converge in
// bounded time, and end with byte-identical segment files and the newest
// acknowledged value of every key. The segments it fetched are counted
// against its --move-bytes-per-second, which its /metrics reports.
func TestClusterCatchUpAfterCompaction(t *testing.T) {
	e2e.ParallelShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const moveRate = 8 << 20
	// The meta group's catch-up, which its partitions' appends drive.
	c := e2e.NewCluster(t, 3, append(e2e.MetaGroupOnly(), "--snapshot-threshold", "64", "--snapshot-interval", "200ms", "--cleaner-interval", "200ms",
		"--move-bytes-per-second", fmt.Sprint(moveRate))...)
	e2e.CreateTopic(t, ctx, c.Nodes[0], "cmp", 1, map[string]string{"segment.bytes": "1024", "cleanup.policy": "compact",
		"min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"})
	l := c.Leader(ctx)
	victim := c.Nodes[2]
	if victim == l {
		victim = c.Nodes[1]
	}
	victim.Kill()
	// One call at a time, the keys in turn: a key's newest acknowledged
	// value is well defined, and every call is its own Raft entry (calls
	// in flight together may share one: docs/architecture.md, "Coalesced
	// appends"), so the follower misses more entries than Raft keeps.
	const keys, writes = 10, 800
	newest := make([]string, keys) // key i's newest acknowledged value
	for i := range writes {
		key := i % keys
		k := fmt.Sprintf("k%d", key)
		v := fmt.Sprintf("v%d-%0100d", i, 0)
		// Retried through the current leader until acknowledged: a write
		// of unknown outcome may be there twice, before the newer ones.
		for try := 0; ; try++ {
			_, err := l.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "cmp", Records: []*logdv1.Record{{Key: []byte(k), Value: []byte(v)}}}))
			if err == nil {
				break
			}
			if try == 20 {
				t.Fatalf("write %d: %v", i, err)
			}
			time.Sleep(100 * time.Millisecond)
			for _, nd := range c.Nodes {
				if st, err := nd.Status(ctx); nd != victim && err == nil && st.State == "Leader" && st.Ready {
					l = nd
				}
			}
		}
		newest[key] = v
	}
	// The cleaner compacts what the last snapshot listed; nothing is
	// written after it.
	time.Sleep(2 * time.Second)
	victim.Launch("")
	cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
	defer ccancel()
	start := time.Now()
	c.Converge(cctx)
	t.Logf("%s converged %v after its restart", victim.ID, time.Since(start).Round(time.Millisecond))

	logs, _ := os.ReadFile(victim.Logs.Name())
	if !strings.Contains(string(logs), "snapshot catch-up") {
		t.Errorf("%s caught up without installing a snapshot; the test did not exercise catch-up", victim.ID)
	}
	if m := scrapeSeries(t, "http://"+victim.Listen+"/metrics"); m["logd_catchup_bytes_total"] <= 0 || m["logd_catchup_limit_bytes_per_second"] != moveRate {
		t.Errorf("%s's catch-up metrics: %v bytes, a budget of %v; want some bytes, a budget of %d", victim.ID,
			m["logd_catchup_bytes_total"], m["logd_catchup_limit_bytes_per_second"], moveRate)
	}
	// Every node must end with the same records and byte-identical
	// segments. Converged means the same Raft index applied, not the same
	// files: a cleaner pass the leader committed last may still be
	// rewriting segments on the others, so the comparison runs again
	// until they agree or the deadline passes. The newest acknowledged
	// value of every key must read back on every node at every attempt.
	var diff string
	for attempt := 1; ; attempt++ {
		c.Converge(cctx)
		if diff = recordDiff(t, ctx, c, newest); diff == "" {
			diff = segmentDiff(t, c)
		}
		if diff == "" || cctx.Err() != nil {
			break
		}
		if attempt%10 == 0 {
			t.Logf("attempt %d: still waiting for the nodes to agree: %s", attempt, diff)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if diff != "" {
		t.Error(diff)
	}
}

// recordDiff reads every node's records of topic cmp, fails the test if
// a key's newest acknowledged value (newest[i] for key ki) does not read
// back, and returns "" if every node holds the same records as the first,
// or which node differs.
func recordDiff(t *testing.T, ctx context.Context, c *e2e.Cluster, newest []string) string {
	t.Helper()
	var first string
	for i, nd := range c.Nodes {
		got := nd.ReadAll(ctx, "cmp", 1)
		last := map[string]string{}
		for _, r := range got[0] {
			last[string(r.Key)] = string(r.Value)
		}
		for key, v := range newest {
			if k := fmt.Sprintf("k%d", key); last[k] != v {
				t.Errorf("%s: key %s reads %q, newest acknowledged %q", nd.ID, k, last[k], v)
			}
		}
		if r := e2e.Render(got); i == 0 {
			first = r
		} else if r != first {
			return fmt.Sprintf("%s holds different records than %s", nd.ID, c.Nodes[0].ID)
		}
	}
	return ""
}

// segmentDiff compares every node's segment files with the first node's;
// "" if all are identical.
func segmentDiff(t *testing.T, c *e2e.Cluster) string {
	want := segmentSums(t, c.Nodes[0].DataDir)
	for _, nd := range c.Nodes[1:] {
		got := segmentSums(t, nd.DataDir)
		if fmt.Sprint(sortedNames(got)) != fmt.Sprint(sortedNames(want)) {
			return fmt.Sprintf("%s has files %v, %s has %v", nd.ID, sortedNames(got), c.Nodes[0].ID, sortedNames(want))
		}
		for name, sum := range want {
			if got[name] != sum {
				return fmt.Sprintf("%s: %s differs from %s's", nd.ID, name, c.Nodes[0].ID)
			}
		}
	}
	return ""
}
