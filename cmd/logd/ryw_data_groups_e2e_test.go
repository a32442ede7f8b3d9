package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/internal/e2e"
)

// TestClusterReadYourWritesDataGroups: with data groups, a record
// produced through a follower of the meta group (which forwards it to the
// meta leader, which routes it to its partition's data group) is seen by
// the next logctl consume through that follower, every time: the
// forwarded answer says where the records went (server.WrittenHeader),
// and the follower's reads and its topic description of those
// partitions wait for them (docs/architecture.md, "Read guarantees").
func TestClusterReadYourWritesDataGroups(t *testing.T) {
	e2e.ParallelShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := e2e.NewCluster(t, 3, "--data-groups-per-node", "2")
	e2e.WaitFor(t, ctx, "six data groups", func() bool {
		st, err := clusterStatus(t, c.Nodes[0])
		return err == nil && len(st.DataGroups) == 6
	})
	l := c.Leader(ctx)
	f := c.Nodes[0]
	if f == l {
		f = c.Nodes[1]
	}
	e2e.CreateTopic(t, ctx, l, "ryw-dg", 6, nil)
	for i := range 10 {
		v := fmt.Sprintf("v%d", i)
		e2e.Logctl(t, f, "produce", "ryw-dg", v)
		if out := e2e.Logctl(t, f, "consume", "ryw-dg", "--from", "earliest"); !strings.Contains(out, v) {
			t.Errorf("round %d: %s produced through %s, then consumed through it: %q", i, v, f.ID, out)
		}
	}
}
