package main

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
)

// clusterStatus is logctl cluster status --output json, from nd.
func clusterStatus(t *testing.T, nd *e2e.Node) (client.ClusterStatus, error) {
	t.Helper()
	var st client.ClusterStatus
	out := e2e.Logctl(t, nd, "cluster", "status", "--output", "json")
	err := json.Unmarshal([]byte(out), &st)
	return st, err
}

// TestClusterDataGroups: three processes with two data groups per node.
// Once all have joined, logctl cluster status shows six groups, each with
// three voters and led by its preferred leader, and each node leading
// two. A node killed with SIGKILL leaves every group led by the others;
// back, it leads its groups again.
func TestClusterDataGroups(t *testing.T) {
	e2e.ParallelShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := e2e.NewCluster(t, 3, "--data-groups-per-node", "2")
	all := []string{"n1", "n2", "n3"}
	var st client.ClusterStatus
	settled := func(nd *e2e.Node, live []string) func() bool {
		return func() bool {
			var err error
			if st, err = clusterStatus(t, nd); err != nil || len(st.DataGroups) != 6 {
				return false
			}
			for _, g := range st.DataGroups {
				v := slices.Clone(g.Voters)
				slices.Sort(v)
				if !slices.Equal(v, all) || g.Lag != 0 || !slices.Contains(live, g.Leader) {
					return false
				}
				if slices.Contains(live, g.Replicas[0]) && g.Leader != g.Replicas[0] {
					return false
				}
			}
			return true
		}
	}
	e2e.WaitFor(t, ctx, "six data groups of three voters, led by their preferred leaders", settled(c.Nodes[0], all))
	for _, n := range st.Nodes {
		if n.LeadsGroups != 2 {
			t.Errorf("%s leads %d data groups, want 2: %+v", n.ID, n.LeadsGroups, st.DataGroups)
		}
	}
	text := e2e.Logctl(t, c.Nodes[0], "cluster", "status")
	for _, want := range []string{"LEADS", "Data groups: 6", "GROUP", "PREFERRED", "VOTERS"} {
		if !strings.Contains(text, want) {
			t.Errorf("cluster status lacks %q:\n%s", want, text)
		}
	}

	// SIGKILL n2: its groups elect leaders among n1 and n3.
	victim := c.Nodes[1]
	led := 0
	for _, g := range st.DataGroups {
		if g.Leader == victim.ID {
			led++
		}
	}
	start := time.Now()
	victim.Kill()
	e2e.WaitFor(t, ctx, "every data group led without n2", func() bool {
		s, err := clusterStatus(t, c.Nodes[0])
		if err != nil || len(s.DataGroups) != 6 {
			return false
		}
		for _, g := range s.DataGroups {
			if g.Leader == "" || g.Leader == victim.ID {
				return false
			}
		}
		return true
	})
	t.Logf("n2 led %d data groups; every group led again %v after its SIGKILL (as seen by polling logctl)", led, time.Since(start).Round(time.Millisecond))

	victim.Launch(c.Nodes[0].Listen)
	e2e.WaitFor(t, ctx, "n2 back, leading its groups", settled(c.Nodes[0], all))
}

// TestClusterDataGroupsKillAndCatchUp: three processes with data groups,
// producers writing a 12-partition topic through two nodes; the third is
// killed with SIGKILL, the groups go on writing past their trailing logs
// (snapshots every 64 entries, 32 kept), and the third comes back and
// catches up each group by installing its snapshot and fetching segment
// bytes from a peer. Every acknowledged record is then on every node, at
// the same offset, once.
func TestClusterDataGroupsKillAndCatchUp(t *testing.T) {
	e2e.ParallelShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := e2e.NewCluster(t, 3, "--data-groups-per-node", "2", "--snapshot-threshold", "64", "--snapshot-interval", "200ms", "--raft-trailing-logs", "32")
	e2e.WaitFor(t, ctx, "six data groups led", func() bool {
		st, err := clusterStatus(t, c.Nodes[0])
		if err != nil || len(st.DataGroups) != 6 {
			return false
		}
		for _, g := range st.DataGroups {
			if g.Leader == "" || len(g.Voters) != 3 {
				return false
			}
		}
		return true
	})
	const parts = 12
	e2e.CreateTopic(t, ctx, c.Nodes[1], "dg", parts, nil)
	ps := e2e.NewProducers(4)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() { defer wg.Done(); ps.Run(ctx, t, c.Nodes[i%2].Listen, "dg", i, stop) }()
	}
	ps.WaitAcks(t, ctx, "acks before the kill", 400)
	victim := c.Nodes[2]
	victim.Kill()
	ps.WaitAcks(t, ctx, "acks with n3 down", 3000)
	victim.Launch(c.Nodes[0].Listen)
	ps.WaitAcks(t, ctx, "acks with n3 back", 400)
	close(stop)
	wg.Wait()
	acks, attempted, calls, failed := ps.Results()
	// Every node holds the same records once its replicas caught up.
	e2e.WaitFor(t, ctx, "every node holds every acknowledged record", func() bool {
		var first string
		for i, nd := range c.Nodes {
			got, err := nd.TryReadAll(ctx, "dg", parts)
			if err != nil {
				return false
			}
			r := e2e.Render(got)
			if i == 0 {
				first = r
			} else if r != first {
				return false
			}
		}
		return true
	})
	c.CheckEveryNode(ctx, "dg", parts, acks, attempted)
	logs, err := os.ReadFile(victim.Logs.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`group=\d+ .*snapshot restored|snapshot restored.* group=\d+`).Match(logs) {
		t.Errorf("n3 caught up without installing a data group's snapshot; its log:\n%s", e2e.Tail(string(logs), 40))
	}
	t.Logf("%d calls (%d failed or unknown), %d records acknowledged", calls, failed, len(acks))
}
