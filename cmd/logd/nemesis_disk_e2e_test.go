package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/internal/e2e"
	"github.com/logd-dev/logd/internal/histcheck"
)

// The disk and membership nemeses' side of the harness (TestNemesisDisk,
// TestNemesisMembership in nemesis_e2e_test.go).

// powerCutMode is the LOGD_FAULT_POWERCUT the disk nemeses start every
// node with: the test's own LOGD_FAULT_POWERCUT if set (nosync switches
// off the durability of Raft's log store, which the checkers must catch),
// else 1.
func powerCutMode() string {
	if m := os.Getenv("LOGD_FAULT_POWERCUT"); m != "" {
		return m
	}
	return "1"
}

// members implements nemesis.Members over a cluster, and records every
// membership call in the workload's history, so that histcheck's
// membership checker knows when each node was out.
//
// While a removed node runs on, a probe appends to it directly every
// 100 ms (with the forwarded header, so it cannot pass the call to the
// leader): it must not acknowledge one.
type members struct {
	c  *e2e.Cluster
	w  *workload
	id int // the history's client id of the membership calls

	probeStop chan struct{} // nil when no probe runs
	probeDone sync.WaitGroup
}

// probe appends to node i directly until stop closes, and records every
// call with the node.
func (m *members) probe(i int, stop chan struct{}) {
	defer m.probeDone.Done()
	nd := m.c.Nodes[i]
	id := int(m.w.clients.Add(1))
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
		p := int32(n % wParts)
		v := fmt.Sprintf("probe%d-%d", id, n)
		c := m.w.rec.Begin(histcheck.Op{Kind: histcheck.Append, Client: id, Node: nd.ID, Leader: true, Topic: wTopic, Partition: p, Value: v})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := nd.RPC.Produce(ctx, req(true, &logdv1.ProduceRequest{Topic: wTopic, Records: []*logdv1.Record{{Value: []byte(v), Partition: &p}}}))
		cancel()
		end(c, err, func(op *histcheck.Op) { op.Offset = resp.Msg.Results[0].Offset })
		if err == nil {
			m.w.oks.Add(1)
		}
	}
}

// stopProbe stops the probe, if one runs.
func (m *members) stopProbe() {
	if m.probeStop != nil {
		close(m.probeStop)
		m.probeDone.Wait()
		m.probeStop = nil
	}
}

// client returns the membership calls' client id.
func (m *members) client() int {
	if m.id == 0 {
		m.id = int(m.w.clients.Add(1))
	}
	return m.id
}

// leader returns the ready leader other than node i, or nil.
func (m *members) leader(ctx context.Context, i int) *e2e.Node {
	l := m.w.leaderOf(ctx)
	if l < 0 || l == i {
		return nil
	}
	return m.c.Nodes[l]
}

// listed reports how the leader lists node i: as a member at all, and as
// a voter; ok is false when no leader answered.
func (m *members) listed(ctx context.Context, i int) (member, voter, ok bool) {
	l := m.leader(ctx, i)
	if l == nil {
		return false, false, false
	}
	st, err := l.Status(ctx)
	if err != nil {
		return false, false, false
	}
	for _, mb := range st.Members {
		if mb.Id == m.c.Nodes[i].ID {
			return true, mb.Suffrage == "voter", true
		}
	}
	return false, false, true
}

// Remove asks the leader to remove node i, again while the answer is an
// error (ABORTED while another change runs, or no leader), for up to 30 s.
// Every call is in the history.
func (m *members) Remove(ctx context.Context, i int) error {
	target := m.c.Nodes[i]
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		via := m.leader(ctx, i)
		if via == nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		c := m.w.rec.Begin(histcheck.Op{Kind: histcheck.RemoveNode, Client: m.client(), Node: via.ID, Target: target.ID})
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := via.RPC.RemoveNode(cctx, connect.NewRequest(&logdv1.RemoveNodeRequest{NodeId: target.ID}))
		ccancel()
		end(c, err, nil)
		if err == nil {
			if target.Cmd != nil {
				m.probeStop = make(chan struct{})
				m.probeDone.Add(1)
				go m.probe(i, m.probeStop)
			}
			return nil
		}
		last = err
		if member, _, ok := m.listed(ctx, i); ok && !member {
			return nil // an earlier call, whose answer was lost, removed it
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s still a member after 30s: %w", target.ID, errors.Join(last, ctx.Err()))
}

// Rejoin kills node i if it runs, gives it a fresh data directory, starts
// it with --join the leader, and waits (within ctx) until the leader lists
// it as a voter and it is ready. The add is in the history from the start
// to the wait's end.
func (m *members) Rejoin(ctx context.Context, i int) error {
	nd := m.c.Nodes[i]
	m.stopProbe()
	nd.Kill()
	nd.DataDir = m.c.T.TempDir()
	var via *e2e.Node
	for via == nil && ctx.Err() == nil {
		if via = m.leader(ctx, i); via == nil {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if via == nil {
		return fmt.Errorf("no leader to join: %w", ctx.Err())
	}
	c := m.w.rec.Begin(histcheck.Op{Kind: histcheck.AddNode, Client: m.client(), Node: via.ID, Target: nd.ID})
	nd.Launch(via.Listen)
	for ctx.Err() == nil {
		if _, voter, _ := m.listed(ctx, i); voter {
			if st, err := nd.Status(ctx); err == nil && st.Ready {
				c.OK(nil)
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	err := fmt.Errorf("%s not a ready voter: %w", nd.ID, ctx.Err())
	c.Unknown(err)
	return err
}
