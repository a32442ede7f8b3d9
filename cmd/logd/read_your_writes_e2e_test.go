package main

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/internal/e2e"
	"github.com/logd-dev/logd/internal/nemesis"
	"github.com/logd-dev/logd/server"
)

// TestClusterReadYourWritesThroughFollower: a record produced through a follower
// (which forwards it to the leader) and acknowledged is in the next fetch
// through that follower, at once, although Raft reaches the follower
// late: the link from the leader to it carries ryWLatency, so the leader
// commits with the other follower and acknowledges before this one has
// the entry (docs/architecture.md, "Read guarantees"). And a record
// produced through the other follower is in a consistent fetch
// (server.ConsistentReadHeader) through the slow one. Without the read
// floor (server/read_your_writes.go), or the read index, the fetch misses
// the record every time. The default run tries ryWShortRounds writes of
// each kind; LOGD_FAULT_LONG=1 (make fault) tries ryWLongRounds.
func TestClusterReadYourWritesThroughFollower(t *testing.T) {
	e2e.ParallelShort(t)
	const (
		ryWLatency     = 100 * time.Millisecond
		ryWShortRounds = 15
		ryWLongRounds  = 1000
	)
	rounds := ryWShortRounds
	if e2e.FaultLong() {
		rounds = ryWLongRounds
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute+time.Duration(rounds)*time.Second)
	defer cancel()
	c, nt := newNemesisCluster(t, 3, nemesisSeed(t), nil)
	ld := c.Leader(ctx)
	li := slices.Index(c.Nodes, ld)
	fi := (li + 1) % len(c.Nodes)
	f := c.Nodes[fi]
	e2e.CreateTopic(t, ctx, ld, "ryw", 1, nil)
	c.Converge(ctx)
	nt.Set(li, fi, nemesis.Link{Latency: ryWLatency})
	defer nt.Heal()

	// Written through the slow follower itself, then through the other
	// one and read with a consistent start through the slow one.
	other := c.Nodes[(li+2)%len(c.Nodes)]
	for _, tc := range []struct {
		name       string
		via        *e2e.Node
		consistent bool
	}{
		{name: "read your writes", via: f},
		{name: "consistent read", via: other, consistent: true},
	} {
		var missed []string
		for i := range rounds {
			v := fmt.Sprintf("%s-%d", tc.via.ID, i)
			resp, err := tc.via.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "ryw", Records: []*logdv1.Record{{Value: []byte(v)}}}))
			if err != nil {
				t.Fatalf("%s: produce %s through %s: %v", tc.name, v, tc.via.ID, err)
			}
			off := resp.Msg.Results[0].Offset
			req := connect.NewRequest(&logdv1.FetchRequest{Topic: "ryw", Offset: off, MaxRecords: 1})
			if tc.consistent {
				req.Header().Set(server.ConsistentReadHeader, "true")
			}
			got, err := f.RPC.Fetch(ctx, req)
			switch {
			case err != nil:
				missed = append(missed, fmt.Sprintf("%s at %d: %v", v, off, err))
			case len(got.Msg.Records) == 0 || string(got.Msg.Records[0].Value) != v:
				missed = append(missed, fmt.Sprintf("%s at %d: fetch answered %d records, end %d", v, off, len(got.Msg.Records), got.Msg.EndOffset))
			}
		}
		if cur := c.Leader(ctx); cur != ld {
			t.Fatalf("leadership moved from %s to %s: the test needs a stable leader", ld.ID, cur.ID)
		}
		if len(missed) > 0 {
			t.Errorf("%s: %d of %d acknowledged writes through %s were not in the next fetch through follower %s; first: %s",
				tc.name, len(missed), rounds, tc.via.ID, f.ID, missed[0])
		}
	}
}
