package replication

import (
	"context"
	"testing"
	"time"

	"github.com/logd-dev/logd/replication/fsm"
)

// TestRaftMetricsFollowers: the leader reports each follower's last
// contact and last log index from their answers; a follower cut off
// stops answering, so its contact ages and its index lag grows with the
// writes it misses, while the other stays current. Apply and log store
// writes are timed, and the leader's election is counted on every node.
func TestRaftMetricsFollowers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newMemCluster(t, ctx, 3)
	leader := c.nodes[0]
	if _, err := NewBackend(leader).createTopic(ctx, fsm.CreateTopic{Name: "orders", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	appendOne := func() {
		t.Helper()
		if _, err := NewBackend(leader).appendCommand(ctx, fsm.Append{Topic: "orders", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, "a")}}}); err != nil {
			t.Fatal(err)
		}
	}
	appendOne()
	c.waitFor(ctx, "both followers current", func() bool {
		m := leader.RaftMetrics()
		if len(m.Followers) != 2 {
			return false
		}
		for _, f := range m.Followers {
			if f.LastIndex != m.LastIndex || time.Since(f.LastContact) > time.Second {
				return false
			}
		}
		return true
	})
	for _, nd := range c.nodes {
		m := nd.RaftMetrics()
		if m.LeaderChanges < 1 || m.Apply.Count == 0 || m.StoreLogs.Count == 0 {
			t.Errorf("%s: leader changes %d, applies %d, log store writes %d; want each > 0", nd.NodeID(), m.LeaderChanges, m.Apply.Count, m.StoreLogs.Count)
		}
		if nd != leader && len(m.Followers) != 0 {
			t.Errorf("follower %s reports followers %v", nd.NodeID(), m.Followers)
		}
	}

	c.isolate(2, true)
	cut := time.Now()
	for range 5 {
		appendOne()
	}
	c.waitFor(ctx, "n3's contact ages", func() bool {
		for _, f := range leader.RaftMetrics().Followers {
			if f.ID == "n3" {
				return f.LastContact.Before(cut) && time.Since(f.LastContact) > 200*time.Millisecond
			}
		}
		return false
	})
	m := leader.RaftMetrics()
	for _, f := range m.Followers {
		lag := m.LastIndex - f.LastIndex
		switch f.ID {
		case "n2":
			if lag > 1 {
				t.Errorf("n2 lags %d entries while connected", lag)
			}
		case "n3":
			if lag < 5 {
				t.Errorf("n3 lags %d entries after missing 5 appends", lag)
			}
		}
	}
}
