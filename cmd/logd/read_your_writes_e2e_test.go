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
// each kind; LOGD_FAULT_LONG=1 (make fault) tries ryWLongRounds, and
// consistentLongRounds consistent reads (about 5 minutes together).
func TestClusterReadYourWritesThroughFollower(t *testing.T) {
	e2e.ParallelShort(t)
	const (
		ryWLatency     = 100 * time.Millisecond
		ryWShortRounds = 15
		ryWLongRounds  = 1000
		// consistentLongRounds: a consistent read costs a round to the
		// leader's quorum on top.
		consistentLongRounds = 300
	)
	rounds, consistentRounds := ryWShortRounds, ryWShortRounds
	if e2e.FaultLong() {
		rounds, consistentRounds = ryWLongRounds, consistentLongRounds
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
	failedWrites := 0
	defer func() { t.Logf("%d writes failed and were tried again", failedWrites) }()
	for _, tc := range []struct {
		name       string
		via        *e2e.Node
		consistent bool
		rounds     int
	}{
		{name: "read your writes", via: f, rounds: rounds},
		{name: "consistent read", via: other, consistent: true, rounds: consistentRounds},
	} {
		var missed []string
		for i := range tc.rounds {
			// A write that fails (an election the slow link provoked) is
			// tried again under a new value: only acknowledged ones count.
			var resp *connect.Response[logdv1.ProduceResponse]
			var v string
			for try := 0; ; try++ {
				v = fmt.Sprintf("%s-%d-%d", tc.via.ID, i, try)
				var err error
				resp, err = tc.via.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "ryw", Records: []*logdv1.Record{{Value: []byte(v)}}}))
				if err == nil {
					break
				}
				if try == 20 {
					t.Fatalf("%s: produce %s through %s: %v", tc.name, v, tc.via.ID, err)
				}
				failedWrites++
				time.Sleep(100 * time.Millisecond)
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
			// The guarantees hold whoever leads; the slow link then is
			// no longer the new leader's.
			t.Logf("%s: leadership moved from %s to %s", tc.name, ld.ID, cur.ID)
		}
		if len(missed) > 0 {
			t.Errorf("%s: %d of %d acknowledged writes through %s were not in the next fetch through follower %s; first: %s",
				tc.name, len(missed), tc.rounds, tc.via.ID, f.ID, missed[0])
		}
	}

	// A write whose answer is an empty message (no body in the binary
	// codec): a topic deleted through the slow follower is gone from the
	// next describe through it.
	var seen []string
	for i := range ryWShortRounds {
		name := fmt.Sprintf("ryw-del-%d", i)
		e2e.CreateTopic(t, ctx, f, name, 1, nil)
		if _, err := f.RPC.DeleteTopic(ctx, connect.NewRequest(&logdv1.DeleteTopicRequest{Name: name})); err != nil {
			t.Fatalf("delete %s through %s: %v", name, f.ID, err)
		}
		if _, err := f.RPC.DescribeTopic(ctx, connect.NewRequest(&logdv1.DescribeTopicRequest{Name: name})); connect.CodeOf(err) != connect.CodeNotFound {
			seen = append(seen, fmt.Sprintf("%s: %v", name, err))
		}
	}
	if len(seen) > 0 {
		t.Errorf("%d of %d topics deleted through follower %s were still described through it; first: %s", len(seen), ryWShortRounds, f.ID, seen[0])
	}
}
