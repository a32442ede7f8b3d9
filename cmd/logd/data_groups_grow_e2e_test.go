package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
)

// TestClusterDataGroupsGrowToSix (make fault): three processes with six
// data groups hold a topic of 24 partitions, 1 MiB each, and another
// under steady produce. Nodes 4, 5 and 6 join one at a time; after each, once the
// groups settle, every node holds its share of bytes (within 15 % of the
// mean; sizes as cluster status reports them) and of preferred
// leaderships (within one). Then n6 is drained and removed while a probe
// reads every partition every 100 ms through n1: no probe fails after
// the client's retries (their slowest is logged). Then n5 is killed for
// good: its replicas are rebuilt on the others within a bound stated
// before (its bytes at the move rate); then n4 dies too, and every
// acknowledged record is read back from the three left.
func TestClusterDataGroupsGrowToSix(t *testing.T) {
	const deadNodeTimeout = 3 * time.Second
	if !e2e.FaultLong() {
		t.Skip("LOGD_FAULT_LONG=1 (make fault) grows a cluster to six nodes under produce")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	args := []string{"--data-groups-per-node", "2", "--dead-node-timeout", deadNodeTimeout.String()}
	c := e2e.NewCluster(t, 3, args...)
	waitGroupsConverged(t, ctx, c, 6)
	const parts = 24
	e2e.CreateTopic(t, ctx, c.Nodes[0], "grow", parts, nil)
	// The bytes to balance, in a topic of their own (the final check
	// reads "grow" for the producers' records only).
	e2e.CreateTopic(t, ctx, c.Nodes[0], "grow-fill", parts, nil)
	fill, err := client.New(c.Nodes[0].Listen, client.Options{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer fill.Close()
	value := make([]byte, 32<<10)
	for p := range int32(parts) {
		for half := range 2 {
			recs := make([]client.Record, 16) // a batch under the topic's max.message.bytes
			for i := range recs {
				recs[i] = client.Record{Partition: &p, Key: fmt.Appendf(nil, "fill-%d-%d-%d", p, half, i), Value: value}
			}
			// Sent again when refused or of unknown outcome (a leader
			// change under load): grow-fill is only bytes to balance, so
			// a batch written twice does no harm.
			e2e.WaitFor(t, ctx, fmt.Sprintf("fill grow-fill-%d", p), func() bool {
				_, err := fill.Produce(ctx, "grow-fill", recs)
				return err == nil
			})
		}
	}
	ps := e2e.NewProducers(5)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); ps.Run(ctx, t, c.Nodes[i].Listen, "grow", i, stop) }()
	}
	ps.WaitAcks(t, ctx, "acks before the joins", 100)

	// shares returns each listed node's bytes and preferred leaderships
	// once the groups settled: voters are replicas, each group led by its
	// preferred leader.
	shares := func(nodes []string, groups int) (map[string]int64, map[string]int, bool) {
		st, ok := runningStatus(t, c)
		if !ok || len(st.DataGroups) != groups {
			return nil, nil, false
		}
		bytes, leads := map[string]int64{}, map[string]int{}
		for _, g := range st.DataGroups {
			v, r := slices.Sorted(slices.Values(g.Voters)), slices.Sorted(slices.Values(g.Replicas))
			if g.Leader != g.Replicas[0] || !slices.Equal(v, r) {
				return nil, nil, false
			}
			leads[g.Replicas[0]]++
			for _, id := range g.Replicas {
				if !slices.Contains(nodes, id) {
					return nil, nil, false
				}
				bytes[id] += g.Bytes
			}
		}
		return bytes, leads, true
	}
	// within reports whether every node holds its share of bytes: within
	// 15 % of the mean or, where the groups are too coarse for that (18
	// replicas of the six full groups over five nodes), within one
	// group's bytes; and leaderships within one.
	within := func(bytes map[string]int64, leads map[string]int, nodes []string, group int64) error {
		var total int64
		lo, hi := len(nodes)*2, 0
		for _, id := range nodes {
			total += bytes[id]
			lo, hi = min(lo, leads[id]), max(hi, leads[id])
		}
		mean := total / int64(len(nodes))
		for _, id := range nodes {
			if d := float64(bytes[id]-mean) / float64(mean); (d > 0.15 || d < -0.15) && abs64(bytes[id]-mean) > group {
				return fmt.Errorf("%s holds %d bytes, %.0f %% off the mean %d (a full group holds %d)", id, bytes[id], 100*d, mean, group)
			}
		}
		if hi-lo > 1 {
			return fmt.Errorf("preferred leaderships %d to %d per node", lo, hi)
		}
		return nil
	}
	nodes := []string{"n1", "n2", "n3"}
	for n := 4; n <= 6; n++ {
		id := fmt.Sprintf("n%d", n)
		nd := e2e.NewNode(t, id, args...)
		c.Nodes = append(c.Nodes, nd)
		nodes = append(nodes, id)
		joined := time.Now()
		nd.Launch(c.Nodes[0].Listen)
		var last error
		var plan string
		defer func() {
			if t.Failed() && last != nil {
				t.Logf("%s's share, last seen: %v; the balancer's plan: %s", id, last, plan)
			}
		}()
		e2e.WaitFor(t, ctx, id+" takes its share of bytes and leaderships", func() bool {
			bytes, leads, ok := shares(nodes, 2*n)
			if !ok {
				return false
			}
			group := int64(0)
			if n < 6 {
				group = largestGroup(t, c)
			}
			last = within(bytes, leads, nodes, group)
			out, err := e2e.TryLogctl(t, c.Nodes[0], "cluster", "balance", "--dry-run")
			if plan = out; err != nil {
				plan = fmt.Sprintf("%s (%v)", out, err)
			}
			return last == nil && err == nil && strings.HasPrefix(plan, "balanced")
		})
		bytes, leads, _ := shares(nodes, 2*n)
		t.Logf("%s joined: balanced after %v; bytes per node %v; preferred leaderships %v", id, time.Since(joined).Round(time.Millisecond), bytes, leads)
		ps.WaitAcks(t, ctx, "acks after "+id+" joined", 100)
	}

	// Drain n6 and remove it while every partition is probed every
	// 100 ms through n1 (the client's normal retries).
	probe, err := client.New(c.Nodes[0].Listen, client.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	probeStop := make(chan struct{})
	var (
		probeMu   sync.Mutex
		probes    int
		probeErrs []error
		slowest   time.Duration
		probeWG   sync.WaitGroup
	)
	probeWG.Add(1)
	go func() {
		defer probeWG.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-probeStop:
				return
			case <-tick.C:
			}
			for p := range int32(parts) {
				start := time.Now()
				_, err := probe.Fetch(ctx, client.FetchRequest{Topic: "grow", Partition: p, Offset: 0, MaxRecords: 1})
				took := time.Since(start)
				probeMu.Lock()
				probes++
				slowest = max(slowest, took)
				if err != nil {
					probeErrs = append(probeErrs, fmt.Errorf("partition %d: %w", p, err))
				}
				probeMu.Unlock()
			}
		}
	}()
	e2e.Logctl(t, c.Nodes[1], "cluster", "drain", "n6")
	e2e.WaitFor(t, ctx, "n6 drained", func() bool {
		_, _, ok := shares(nodes[:5], 12)
		return ok
	})
	e2e.Logctl(t, c.Nodes[1], "cluster", "remove", "n6")
	close(probeStop)
	probeWG.Wait()
	c.Nodes[5].Kill()
	c.Nodes = c.Nodes[:5]
	if len(probeErrs) > 0 {
		t.Errorf("%d of %d probes failed while n6 drained; first: %v", len(probeErrs), probes, probeErrs[0])
	}
	t.Logf("%d probes of every partition while n6 drained and left, the slowest %v", probes, slowest.Round(time.Millisecond))

	// n5 killed for good: past the dead-node timeout its replicas are
	// rebuilt on the four others, within a bound stated before: the
	// timeout, then its bytes copied at the move rate (32 MiB/s, each
	// copy from one peer), twice over, and 30 s for elections and the
	// meta leader's passes.
	b5, _, _ := shares(nodes[:5], 12)
	bound := deadNodeTimeout + 2*time.Duration(float64(b5["n5"])/float64(32<<20)*float64(time.Second)) + 30*time.Second
	t.Logf("n5 holds %d bytes: its replicas are to be rebuilt within %v of its kill", b5["n5"], bound.Round(time.Millisecond))
	killed := time.Now()
	c.Nodes[4].Kill()
	// Rebuilt: every group's voters are its replicas, all on n1 to n4,
	// and it has a leader. Its preferred leader takes the leadership
	// back after (leadership transfers are spaced 10 s apart per group,
	// and are not part of the rebuild).
	var last client.ClusterStatus
	e2e.WaitFor(t, ctx, "n5's replicas rebuilt on n1 to n4", func() bool {
		st, ok := runningStatus(t, c)
		if !ok || len(st.DataGroups) != 12 {
			return false
		}
		last = st
		for _, g := range st.DataGroups {
			v, r := slices.Sorted(slices.Values(g.Voters)), slices.Sorted(slices.Values(g.Replicas))
			if g.Leader == "" || !slices.Equal(v, r) || !slices.ContainsFunc(nodes[:4], func(id string) bool { return id == g.Leader }) {
				return false
			}
			for _, id := range g.Replicas {
				if !slices.Contains(nodes[:4], id) {
					return false
				}
			}
		}
		return true
	})
	if rebuilt := time.Since(killed); rebuilt > bound {
		var rows []string
		for _, g := range last.DataGroups {
			rows = append(rows, fmt.Sprintf("g%d replicas %v voters %v leader %s lag %d", g.ID, g.Replicas, g.Voters, g.Leader, g.Lag))
		}
		t.Errorf("n5's replicas rebuilt %v after its kill, past the bound of %v; the groups then:\n%s", rebuilt.Round(time.Millisecond), bound.Round(time.Millisecond), strings.Join(rows, "\n"))
	} else {
		t.Logf("n5's replicas rebuilt %v after its kill (bound %v)", rebuilt.Round(time.Millisecond), bound.Round(time.Millisecond))
	}
	e2e.WaitFor(t, ctx, "every group led by its preferred leader on n1 to n4", func() bool {
		_, _, ok := shares(nodes[:4], 12)
		return ok
	})
	t.Logf("every group back with its preferred leader %v after n5's kill", time.Since(killed).Round(time.Millisecond))
	ps.WaitAcks(t, ctx, "acks after n5's replicas were rebuilt", 50)
	// Then a second node dies: every group keeps two of its three
	// replicas, and nothing acknowledged is lost.
	c.Nodes[3].Kill()
	ps.WaitAcks(t, ctx, "acks with n4 dead too", 50)

	close(stop)
	wg.Wait()
	acks, attempted, calls, failed := ps.Results()
	live := &e2e.Cluster{T: t, Nodes: c.Nodes[:3]}
	e2e.WaitFor(t, ctx, "n1 to n3 hold the same records", sameOnEveryNode(ctx, live, "grow", parts))
	live.CheckEveryNode(ctx, "grow", parts, acks, attempted)
	t.Logf("%d calls (%d failed or unknown: %s), %d records acknowledged", calls, failed, ps.FailureKinds(), len(acks))
}

// largestGroup is the bytes of the largest data group cluster status
// reports.
func largestGroup(t *testing.T, c *e2e.Cluster) int64 {
	st, _ := runningStatus(t, c)
	var n int64
	for _, g := range st.DataGroups {
		n = max(n, g.Bytes)
	}
	return n
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
