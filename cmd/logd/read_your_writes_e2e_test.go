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
)

// TestReadYourWritesThroughFollower: a record produced through a follower
// (which forwards it to the leader) and acknowledged is in the next fetch
// through that follower, at once, although Raft reaches the follower
// late: the link from the leader to it carries ryWLatency, so the leader
// commits with the other follower and acknowledges before this one has
// the entry (docs/architecture.md, "Read guarantees"). Without the read
// floor (server/read_your_writes.go) the fetch misses the record every
// time. The default run tries ryWShortRounds writes; LOGD_FAULT_LONG=1
// (make fault) tries ryWLongRounds.
func TestReadYourWritesThroughFollower(t *testing.T) {
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

	var missed []string
	for i := range rounds {
		v := fmt.Sprintf("ryw-%d", i)
		resp, err := f.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "ryw", Records: []*logdv1.Record{{Value: []byte(v)}}}))
		if err != nil {
			t.Fatalf("produce %s through %s: %v", v, f.ID, err)
		}
		if cur := c.Leader(ctx); cur != ld {
			t.Fatalf("leadership moved from %s to %s: the test needs a stable leader", ld.ID, cur.ID)
		}
		off := resp.Msg.Results[0].Offset
		got, err := f.RPC.Fetch(ctx, connect.NewRequest(&logdv1.FetchRequest{Topic: "ryw", Offset: off, MaxRecords: 1}))
		switch {
		case err != nil:
			missed = append(missed, fmt.Sprintf("%s at %d: %v", v, off, err))
		case len(got.Msg.Records) == 0 || string(got.Msg.Records[0].Value) != v:
			missed = append(missed, fmt.Sprintf("%s at %d: fetch answered %d records, end %d", v, off, len(got.Msg.Records), got.Msg.EndOffset))
		}
	}
	if len(missed) > 0 {
		t.Fatalf("%d of %d acknowledged writes through follower %s were not in the next fetch through it; first: %s", len(missed), rounds, f.ID, missed[0])
	}
}
