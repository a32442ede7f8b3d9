package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
)

// TestClusterGroupConsumeOnFollower: `logctl consume TOPIC --group G`
// through a follower prints every record the group has not consumed yet,
// as it does through the leader, and exits once it has read up to the ends
// it saw at start. A follower forwards the member's join to the leader but
// serves the group's fetches from the state it has applied, which may not
// hold that join yet (docs/architecture.md: followers serve what they have
// applied). Each follower is tried with a group that already has committed
// offsets (its first member read some records through the leader and left)
// and with a new group.
func TestClusterGroupConsumeOnFollower(t *testing.T) {
	e2e.ParallelShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := e2e.NewCluster(t, 3)
	ld := c.Leader(ctx)
	cl := groupClient(t, ld)
	const parts, perPart = 3, 20
	if _, err := cl.CreateTopic(ctx, "orders", parts, nil); err != nil {
		t.Fatal(err)
	}
	var recs []client.Record
	var all []string
	for p := range int32(parts) {
		for i := range perPart {
			v := fmt.Sprintf("p%d-r%02d", p, i)
			all = append(all, v)
			recs = append(recs, client.Record{Value: []byte(v), Partition: &p})
		}
	}
	if _, err := cl.Produce(ctx, "orders", recs); err != nil {
		t.Fatal(err)
	}
	slices.Sort(all)
	// Every node holds the records and the topic: only the group's own
	// writes (join, commits) are new to a follower when it is asked.
	c.Converge(ctx)

	lines := func(out string) []string {
		return strings.Fields(out)
	}
	for i, f := range c.Nodes {
		if f == ld {
			continue
		}
		group := fmt.Sprintf("billing-%d", i)
		first := lines(e2e.Logctl(t, ld, "consume", "orders", "--group", group, "--max", "7"))
		if len(first) != 7 {
			t.Fatalf("%s through the leader: printed %v, want 7 records", group, first)
		}
		c.Converge(ctx) // the follower knows the group and its commits
		rest := lines(e2e.Logctl(t, f, "consume", "orders", "--group", group))
		got := slices.Sorted(slices.Values(append(slices.Clone(first), rest...)))
		if !slices.Equal(got, all) {
			t.Errorf("%s through follower %s: printed %d records after the leader's %d, want the %d not consumed yet; together %v",
				group, f.ID, len(rest), len(first), len(all)-len(first), got)
		}

		fresh := fmt.Sprintf("analytics-%d", i)
		out := lines(e2e.Logctl(t, f, "consume", "orders", "--group", fresh))
		if got := slices.Sorted(slices.Values(out)); !slices.Equal(got, all) {
			t.Errorf("new group %s through follower %s: printed %d records, want all %d: %v", fresh, f.ID, len(out), len(all), got)
		}
		for _, g := range []string{group, fresh} {
			d, err := cl.DescribeGroup(ctx, g)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range d.Partitions {
				if p.LagRecords != 0 {
					t.Errorf("group %s partition %d: lag %d after consuming through %s, want 0", g, p.Partition, p.LagRecords, f.ID)
				}
			}
		}
	}
}
