package e2e

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/logd-dev/logd/api/logdv1"
)

// Cluster is a test cluster; Nodes[0] bootstraps, the others join it.
type Cluster struct {
	T     *testing.T
	Nodes []*Node
}

// NewCluster starts n nodes with extra flags and waits until all are
// voters.
func NewCluster(t *testing.T, n int, extra ...string) *Cluster {
	t.Helper()
	c := &Cluster{T: t}
	for i := range n {
		c.Nodes = append(c.Nodes, NewNode(t, fmt.Sprintf("n%d", i+1), extra...))
	}
	c.Start()
	return c
}

// Start launches c's prepared nodes: Nodes[0] bootstraps, the others join
// it; it waits until all are voters.
func (c *Cluster) Start() {
	t := c.T
	t.Helper()
	n := len(c.Nodes)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first := c.Nodes[0]
	first.Launch("")
	WaitFor(t, ctx, first.ID+" ready", func() bool {
		st, err := first.Status(ctx)
		return err == nil && st.Ready && st.LeaderId != ""
	})
	for _, nd := range c.Nodes[1:] {
		nd.Launch(first.Listen)
	}
	c.WaitVoters(ctx, n)
	c.WaitDataGroups(ctx, n)
}

// WaitDataGroups waits until each data group, if the cluster has any,
// has min(3, n) replicas (logd's default replication factor) in the
// table a live node reports, and a live replica of it reports every one
// of them a voter and a leader (a node reports the Raft state of its own
// replicas only, and balancing may move any node out of a group): a node
// that joins becomes a replica of each group below the factor as a
// non-voter first, and a group that loses a node before its new replica
// votes may lose its majority (docs/operations.md, "Data groups").
func (c *Cluster) WaitDataGroups(ctx context.Context, n int) {
	c.T.Helper()
	want := min(3, n)
	var last string // what the last look saw short, for a failure
	defer func() {
		if c.T.Failed() && last != "" {
			c.T.Logf("the data groups last seen: %s", last)
		}
	}()
	WaitFor(c.T, ctx, fmt.Sprintf("every data group with %d voters", want), func() bool {
		var table []*logdv1.DataGroupStatus
		held := map[uint64]bool{} // groups a live replica reports settled
		for _, nd := range c.Nodes {
			if nd.Cmd == nil {
				continue
			}
			st, err := nd.Status(ctx)
			if err != nil {
				last = fmt.Sprintf("%s: %v", nd.ID, err)
				return false
			}
			if table == nil {
				table = st.DataGroups
			}
			for _, g := range st.DataGroups {
				if g.State != "" && g.LeaderId != "" && len(g.Voters) == want && !slices.ContainsFunc(g.Replicas, func(r string) bool { return !slices.Contains(g.Voters, r) }) {
					held[g.Id] = true
				}
			}
		}
		for _, g := range table {
			if len(g.Replicas) != want || !held[g.Id] {
				last = fmt.Sprintf("group %d with replicas %v; settled at a replica: %v", g.Id, g.Replicas, held[g.Id])
				return false
			}
		}
		return true
	})
}

// WaitVoters waits until the first live node sees n voters and a leader.
func (c *Cluster) WaitVoters(ctx context.Context, n int) {
	c.T.Helper()
	WaitFor(c.T, ctx, fmt.Sprintf("%d voters", n), func() bool {
		for _, nd := range c.Nodes {
			if nd.Cmd == nil {
				continue
			}
			st, err := nd.Status(ctx)
			if err != nil || st.LeaderId == "" {
				return false
			}
			voters := 0
			for _, m := range st.Members {
				if m.Suffrage == "voter" {
					voters++
				}
			}
			return voters == n
		}
		return false
	})
}

// Leader returns the node that reports itself leader.
func (c *Cluster) Leader(ctx context.Context) *Node {
	c.T.Helper()
	var out *Node
	WaitFor(c.T, ctx, "a leader", func() bool {
		for _, nd := range c.Nodes {
			if nd.Cmd == nil {
				continue
			}
			if st, err := nd.Status(ctx); err == nil && st.State == "Leader" && st.Ready {
				out = nd
				return true
			}
		}
		return false
	})
	return out
}

// Converge waits until every node is ready and has applied the same index.
func (c *Cluster) Converge(ctx context.Context) {
	c.T.Helper()
	c.ConvergeNodes(ctx, c.Nodes)
}

// ConvergeNodes is Converge for some of the nodes. One of them must be a
// ready leader: followers learn that the last entries are committed only
// from a leader, so without one they can agree on an index that still
// lacks acknowledged records.
func (c *Cluster) ConvergeNodes(ctx context.Context, nodes []*Node) {
	c.T.Helper()
	WaitFor(c.T, ctx, "nodes converge under a leader", func() bool { return c.Converged(ctx, nodes) })
}

// Converged reports whether nodes are ready, one of them leads, and all
// have committed and applied the same index; and so has every replica
// among them of each data group, one of which leads it (a follower's
// replica serves what it applied, docs/architecture.md "Data groups").
func (c *Cluster) Converged(ctx context.Context, nodes []*Node) bool {
	var idx []uint64
	leaders := 0
	groups := map[uint64][]uint64{}
	groupLeaders := map[uint64]int{}
	for _, nd := range nodes {
		st, err := nd.Status(ctx)
		if err != nil || !st.Ready {
			return false
		}
		if st.State == "Leader" {
			leaders++
		}
		idx = append(idx, st.AppliedIndex, st.CommitIndex)
		for _, g := range st.DataGroups {
			if g.State == "" { // no replica here
				continue
			}
			groups[g.Id] = append(groups[g.Id], g.AppliedIndex, g.CommitIndex)
			if g.State == "Leader" {
				groupLeaders[g.Id]++
			}
		}
	}
	for id, gi := range groups {
		if groupLeaders[id] != 1 || slices.Min(gi) != slices.Max(gi) {
			return false
		}
	}
	return leaders == 1 && slices.Min(idx) == slices.Max(idx)
}

// CheckEveryNode checks each node's copy (Check), and requires every node
// to hold the same records at the same offsets.
func (c *Cluster) CheckEveryNode(ctx context.Context, topic string, parts int32, acks []Ack, attempted map[string]bool) {
	c.T.Helper()
	c.CheckEveryNodeTB(ctx, c.T, topic, parts, acks, attempted)
}

// CheckEveryNodeTB is CheckEveryNode reporting to tb, such as a recorder
// of complaints a test expects.
func (c *Cluster) CheckEveryNodeTB(ctx context.Context, tb testing.TB, topic string, parts int32, acks []Ack, attempted map[string]bool) {
	tb.Helper()
	var first string
	var firstGot map[int32][]*logdv1.FetchedRecord
	for i, nd := range c.Nodes {
		// A node that cannot read what it acknowledged (a control run's
		// data group that lost the topic with its unsynced log, say) is
		// a complaint as a loss is.
		got, err := nd.TryReadAll(ctx, topic, parts)
		if err != nil {
			tb.Errorf("%v", err)
			continue
		}
		Check(tb, got, acks, attempted)
		r := Render(got)
		if i == 0 {
			first, firstGot = r, got
		} else if r != first {
			tb.Errorf("%s holds different records than %s:\n%s", nd.ID, c.Nodes[0].ID, Differences(nd.ID, got, c.Nodes[0].ID, firstGot))
		}
	}
}

// KillAll SIGKILLs every running node before reaping any, so none runs on
// after another died: with every node's writes cut at once, a power cut
// of the cluster.
func (c *Cluster) KillAll() {
	var running []*Node
	for _, nd := range c.Nodes {
		if nd.Cmd != nil {
			nd.Cmd.Process.Signal(syscall.SIGCONT)
			nd.Cmd.Process.Signal(syscall.SIGKILL)
			running = append(running, nd)
		}
	}
	for _, nd := range running {
		nd.Cmd.Wait()
		nd.Cmd = nil
	}
}

// RestartAll launches every node again (each has its state: none
// bootstraps) and waits for a ready leader.
func (c *Cluster) RestartAll(ctx context.Context) {
	c.T.Helper()
	for _, nd := range c.Nodes {
		nd.Launch("")
	}
	c.Leader(ctx)
}

// Term is the highest Raft term a live node reports: how many elections
// the cluster has held.
func (c *Cluster) Term(ctx context.Context) uint64 {
	var term uint64
	for _, nd := range c.Nodes {
		if st, err := nd.Status(ctx); err == nil && st.Term > term {
			term = st.Term
		}
	}
	return term
}
