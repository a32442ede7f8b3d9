package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
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
	// Calls pinned to f: a client (logctl) moves to another node when a
	// leader change refuses a call, and a write that did not pass through
	// f is not one f promises to show (a read through f after it may
	// trail). A refused call is sent to f again (e2e.Unapplied); a read
	// that fails (BehindError: f could not reach a replica holding the
	// write yet) is tried again; one that answers must hold the write.
	// produce writes v through f. With an idempotency key, a call whose
	// outcome is unknown (the leadership lost while it committed) is sent
	// again too.
	produce := func(round int, v string) {
		t.Helper()
		for {
			err := e2e.Unapplied(ctx, func() error {
				_, err := f.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "ryw-dg", Records: []*logdv1.Record{{Value: []byte(v), IdempotencyKey: v}}}))
				return err
			})
			if err == nil {
				return
			}
			if connect.CodeOf(err) != connect.CodeDeadlineExceeded || ctx.Err() != nil {
				t.Fatalf("round %d: produce through %s: %v", round, f.ID, err)
			}
		}
	}
	for i := range 10 {
		v := fmt.Sprintf("v%d", i)
		produce(i, v)
		var got map[int32][]*logdv1.FetchedRecord
		e2e.WaitFor(t, ctx, fmt.Sprintf("round %d: a read through %s that answers", i, f.ID), func() bool {
			var err error
			got, err = f.TryReadAll(ctx, "ryw-dg", 6)
			return err == nil
		})
		if out := e2e.Render(got) + "\n"; !strings.Contains(strings.ReplaceAll(out, "\n", " \n"), "="+v+" ") {
			t.Errorf("round %d: %s produced through %s, then read through it: %s", i, v, f.ID, out)
		}
	}

	// A queue group's state over data groups: a claim and an ack through
	// the follower (each forwarded to the meta leader, which routes it to
	// the record's group) are seen by the next describe through it, every
	// time: the forwarded answers name the groups written
	// (server.GroupsAppliedHeader) and the follower's reads of them wait.
	// A call a leader change refused is sent again (e2e.Unapplied): the
	// test is of what the answers say, not of the leadership.
	if err := e2e.Unapplied(ctx, func() error {
		_, err := f.RPC.CreateQueueGroup(ctx, connect.NewRequest(&logdv1.CreateQueueGroupRequest{Topic: "ryw-dg", Group: "w", FromEnd: true}))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var stale []string
	for i := range 20 {
		produce(i, fmt.Sprintf("q%d", i))
		var cl *connect.Response[logdv1.ClaimResponse]
		err := e2e.Unapplied(ctx, func() error {
			var err error
			cl, err = f.RPC.Claim(ctx, connect.NewRequest(&logdv1.ClaimRequest{Topic: "ryw-dg", Group: "w", MaxRecords: 1, MaxWaitMs: 5000}))
			return err
		})
		if err != nil || len(cl.Msg.Records) != 1 {
			t.Fatalf("round %d: claim through %s: %v", i, f.ID, err)
		}
		rec := cl.Msg.Records[0]
		d := describeQueue(t, ctx, f)
		if d.BacklogRecords != 1 || len(d.InFlight) != 1 {
			stale = append(stale, fmt.Sprintf("round %d after the claim of %d@%d: backlog %d, in flight %d", i, rec.Partition, rec.Offset, d.BacklogRecords, len(d.InFlight)))
		}
		if err := e2e.Unapplied(ctx, func() error {
			_, err := f.RPC.Ack(ctx, connect.NewRequest(&logdv1.AckRequest{Topic: "ryw-dg", Group: "w", Tokens: []string{rec.Token}}))
			return err
		}); err != nil {
			t.Fatalf("round %d: ack through %s: %v", i, f.ID, err)
		}
		if d := describeQueue(t, ctx, f); d.BacklogRecords != 0 || len(d.InFlight) != 0 {
			stale = append(stale, fmt.Sprintf("round %d after the ack of %d@%d: backlog %d, in flight %d", i, rec.Partition, rec.Offset, d.BacklogRecords, len(d.InFlight)))
		}
	}
	if len(stale) > 0 {
		t.Errorf("%d of 40 describes through %s missed the claim or ack just made through it; first: %s", len(stale), f.ID, stale[0])
	}
}

// describeQueue describes queue group w of ryw-dg through nd, with the
// records in flight.
func describeQueue(t *testing.T, ctx context.Context, nd *e2e.Node) *logdv1.DescribeQueueGroupResponse {
	t.Helper()
	d, err := nd.RPC.DescribeQueueGroup(ctx, connect.NewRequest(&logdv1.DescribeQueueGroupRequest{Topic: "ryw-dg", Group: "w", InFlight: true}))
	if err != nil {
		t.Fatalf("describe through %s: %v", nd.ID, err)
	}
	return d.Msg
}
