package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/internal/e2e"
)

// Crashes inside durability steps (T6 of docs/faults.md) at process level,
// through the failpoints of the fault build (internal/failpoint): a node
// started with GOFAIL_FAILPOINTS=<point>=panic dies the first time it
// reaches the point.

// durabilityPoints are the failpoints of internal/failpoint, one per
// step; side marks those whose step needs the cleaner busy (writes to a
// topic with retention and one with compaction).
var durabilityPoints = []struct {
	name string
	side bool
}{
	{name: "logSegmentWrite"},
	{name: "logFsync"},
	{name: "logRoll"},
	{name: "logRetentionDelete", side: true},
	{name: "logCompactionSwap", side: true},
	{name: "fsmSnapshotPersist"},
	{name: "logInstall"},
}

// readFrom renders a topic as a node holds it, from each partition's log
// start: for topics whose start moves (retention) or whose records go
// (compaction), which check cannot judge but every node must agree on.
func readFrom(ctx context.Context, nd *e2e.Node, topic string) (string, error) {
	d, err := nd.RPC.DescribeTopic(ctx, connect.NewRequest(&logdv1.DescribeTopicRequest{Name: topic}))
	if err != nil {
		return "", fmt.Errorf("%s: describe %s: %w", nd.ID, topic, err)
	}
	var b strings.Builder
	for _, p := range d.Msg.Partitions {
		fmt.Fprintf(&b, "%d [%d, %d):", p.Partition, p.LogStartOffset, p.EndOffset)
		for off := p.LogStartOffset; off < p.EndOffset; {
			resp, err := nd.RPC.Fetch(ctx, connect.NewRequest(&logdv1.FetchRequest{Topic: topic, Partition: p.Partition, Offset: off, MaxBytes: 1 << 20}))
			if err != nil {
				return "", fmt.Errorf("%s: fetch %s-%d@%d: %w", nd.ID, topic, p.Partition, off, err)
			}
			for _, r := range resp.Msg.Records {
				fmt.Fprintf(&b, " %d=%s/%s", r.Offset, r.Key, r.Value)
			}
			if resp.Msg.NextOffset <= off {
				break
			}
			off = resp.Msg.NextOffset
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

// sideWriter writes through nd, until stop, to a topic with retention
// ("ret") and one with compaction ("cmp", ten keys rewritten over and
// over), so the cleaner has work on every pass. Its writes are not
// checked for loss; every node must hold the same.
func sideWriter(ctx context.Context, nd *e2e.Node, stop <-chan struct{}) {
	pad := strings.Repeat("x", 100)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		for _, r := range []*logdv1.ProduceRequest{
			{Topic: "ret", Records: []*logdv1.Record{{Value: []byte(fmt.Sprintf("r%d-%s", i, pad))}}},
			{Topic: "cmp", Records: []*logdv1.Record{{Key: []byte(fmt.Sprintf("k%d", i%10)), Value: []byte(fmt.Sprintf("c%d-%s", i, pad))}}},
		} {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := nd.RPC.Produce(cctx, connect.NewRequest(r))
			cancel()
			if err != nil {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

// TestClusterFailpoints is T6 of docs/faults.md: for each durability step
// (segment write, fsync, roll, retention delete, compaction swap, snapshot
// persist, catch-up install), a follower crashes inside it, with its
// unsynced bytes lost as well (LOGD_FAULT_POWERCUT), and is restarted
// with no help: it must reach the others' applied index with the same
// records, and lose nothing acknowledged.
func TestClusterFailpoints(t *testing.T) {
	t.Setenv("LOGD_FAULT_POWERCUT", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := e2e.NewCluster(t, 3, "--snapshot-threshold", "64", "--snapshot-interval", "200ms", "--cleaner-interval", "200ms")
	const parts = 2
	e2e.CreateTopic(t, ctx, c.Nodes[0], "fp", parts, map[string]string{"segment.bytes": "4096"})
	e2e.CreateTopic(t, ctx, c.Nodes[0], "ret", 1, map[string]string{"segment.bytes": "1024", "retention.bytes": "4096"})
	e2e.CreateTopic(t, ctx, c.Nodes[0], "cmp", 1, map[string]string{"segment.bytes": "1024", "cleanup.policy": "compact",
		"min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"})
	ps := e2e.NewProducers(2)
	id := 0
	// load writes to "fp" through the live nodes other than victim, and
	// with side to "ret" and "cmp", until the returned stops are called.
	load := func(victim *e2e.Node, producers int, side bool) (stopProducers, stopSide func()) {
		var others []*e2e.Node
		for _, nd := range c.Nodes {
			if nd != victim {
				others = append(others, nd)
			}
		}
		done, sideDone := make(chan struct{}), make(chan struct{})
		var wg, sideWG sync.WaitGroup
		for i := range producers {
			id++
			wg.Add(1)
			go func(id int) { defer wg.Done(); ps.Run(ctx, t, others[i%2].Listen, "fp", id, done) }(id)
		}
		if side {
			sideWG.Add(1)
			go func() { defer sideWG.Done(); sideWriter(ctx, others[0], sideDone) }()
		}
		var sideOnce, once sync.Once
		stopSide = func() { sideOnce.Do(func() { close(sideDone); sideWG.Wait() }) }
		return func() { stopSide(); once.Do(func() { close(done); wg.Wait() }) }, stopSide
	}
	// make fault runs every point three times, on varying followers.
	rounds := 1
	if e2e.FaultLong() {
		rounds = 3
	}
	for k := range rounds * len(durabilityPoints) {
		point := durabilityPoints[k%len(durabilityPoints)]
		name := point.name
		if rounds > 1 {
			name = fmt.Sprintf("round%d/%s", k/len(durabilityPoints)+1, point.name)
		}
		ok := t.Run(name, func(t *testing.T) {
			leader := c.Leader(ctx)
			victim := c.Nodes[(k+k/len(durabilityPoints)+1)%3]
			if victim == leader {
				victim = c.Nodes[(k+k/len(durabilityPoints)+2)%3]
			}
			victim.Kill()
			if point.name == "logInstall" {
				// Behind by more than Raft's trailing logs (512), it can
				// only catch up by a snapshot install, copying segments.
				// Counted in the leader's entries of the groups that hold
				// fp's partitions (the meta group, or data groups; the
				// least of them): calls in flight together may share one
				// (docs/architecture.md, "Coalesced appends").
				groups := map[uint64]bool{}
				if d, err := leader.RPC.DescribeTopic(ctx, connect.NewRequest(&logdv1.DescribeTopicRequest{Name: "fp"})); err == nil {
					for _, p := range d.Msg.Partitions {
						groups[p.DataGroup] = true
					}
				}
				applied := func() uint64 {
					st, err := leader.Status(ctx)
					if err != nil {
						return 0
					}
					least := uint64(0)
					if groups[0] {
						least = st.AppliedIndex
					}
					for _, g := range st.DataGroups {
						if groups[g.Id] && (least == 0 || g.AppliedIndex < least) {
							least = g.AppliedIndex
						}
					}
					return least
				}
				stop, _ := load(victim, 8, false)
				before := applied()
				e2e.WaitFor(t, ctx, "entries while the victim is down", func() bool { return applied() > before+700 })
				stop()
			}
			stop, stopSide := load(victim, 3, point.side)
			defer stop()
			victim.LaunchWith("", "GOFAIL_FAILPOINTS="+point.name+"=panic")
			exited := make(chan struct{})
			go func(p *os.Process) { p.Wait(); close(exited) }(victim.Cmd.Process)
			select {
			case <-exited:
			case <-time.After(time.Minute):
				t.Fatalf("%s did not reach %s within a minute", victim.ID, point.name)
			}
			victim.Cmd = nil
			// The cleaner goes idle before the restart: a catch-up copies
			// the segments the leader's latest snapshot lists, by base and
			// size, and fails while the peers have compacted or deleted
			// them since and no newer snapshot was taken.
			stopSide()
			out, _ := os.ReadFile(victim.Logs.Name())
			if !strings.Contains(string(out), "failpoint "+point.name) {
				t.Fatalf("%s exited, but not at failpoint %s:\n%s", victim.ID, point.name, e2e.Tail(string(out), 3000))
			}
			t.Logf("%s crashed at %s; %d records acknowledged so far", victim.ID, point.name, ps.AckCount())
			// Restarted with no failpoint, it recovers on its own while
			// the others keep taking writes, and so snapshots.
			victim.Launch("")
			cctx, ccancel := context.WithTimeout(ctx, 90*time.Second)
			defer ccancel()
			e2e.WaitFor(t, cctx, victim.ID+" ready again", func() bool {
				st, err := victim.Status(cctx)
				return err == nil && st.Ready
			})
			stop()
			c.Converge(cctx)
			c.CheckEveryNode(cctx, "fp", parts, ps.Acks, ps.Attempted)
			for _, topic := range []string{"ret", "cmp"} {
				var first string
				for i, nd := range c.Nodes {
					got, err := readFrom(cctx, nd, topic)
					if err != nil {
						t.Fatal(err)
					}
					if i == 0 {
						first = got
					} else if got != first {
						t.Errorf("%s: %s holds\n%s\nbut %s holds\n%s", topic, nd.ID, e2e.Tail(got, 600), c.Nodes[0].ID, e2e.Tail(first, 600))
					}
				}
			}
		})
		if !ok {
			break // the cluster may be in no state for the next point
		}
	}
}
