package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
	"github.com/logd-dev/logd/internal/nemesis"
)

// The replica moves' side of the nemesis harness (kill-mid-move faults:
// TestNemesisDataGroupsMidMove, TestNemesisDataGroupsFive).

// moves implements nemesis.Moves over a cluster, through the Go client's
// admin calls (DrainNode, ListMoves, PlanBalance) at a running node: the meta leader
// when one answers, so the moves listed are those of the table that
// drives them. Its methods run on the runner's goroutine, as procs'.
type moves struct{ c *e2e.Cluster }

// adminTimeout bounds one admin call.
const adminTimeout = 5 * time.Second

// call calls f with a client of the meta leader, or of another running
// node when none leads.
func (m moves) call(ctx context.Context, f func(*client.Client) error) error {
	var nd *e2e.Node
	if l, ok := procs(m).Leader(ctx); ok {
		nd = m.c.Nodes[l]
	} else if i := slices.IndexFunc(m.c.Nodes, func(nd *e2e.Node) bool { return nd.Cmd != nil }); i >= 0 {
		nd = m.c.Nodes[i]
	} else {
		return errors.New("no node runs")
	}
	cl, err := client.New(nd.Listen, client.Options{Timeout: adminTimeout})
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := f(cl); err != nil {
		return fmt.Errorf("at %s: %w", nd.ID, err)
	}
	return nil
}

// Drain drains node i (undo: ends its drain), again while the answer is
// an error that may pass (no leader, a lost answer), until ctx ends.
func (m moves) Drain(ctx context.Context, i int, undo bool) error {
	id := m.c.Nodes[i].ID
	var last error
	for ctx.Err() == nil {
		last = m.call(ctx, func(cl *client.Client) error {
			_, err := cl.DrainNode(ctx, id, undo)
			return err
		})
		switch connect.CodeOf(last) {
		case connect.CodeInvalidArgument, connect.CodeFailedPrecondition:
			return last // the node cannot be drained: asking again will not help
		}
		if last == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return errors.Join(last, ctx.Err())
}

// Replicas counts each node's replicas in the answering node's table, as
// its balance plan's loads before any step.
func (m moves) Replicas(ctx context.Context) (map[int]int, error) {
	var plan client.BalancePlan
	err := m.call(ctx, func(cl *client.Client) error {
		var err error
		plan, err = cl.PlanBalance(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := map[int]int{}
	for _, l := range plan.Loads {
		if i := m.indexes([]string{l.Node}); len(i) == 1 {
			out[i[0]] = l.ReplicasBefore
		}
	}
	return out, nil
}

// InFlight lists the moves the answering node's table marks; a move whose
// voters are known to be its replicas already is done.
func (m moves) InFlight(ctx context.Context) ([]nemesis.Move, error) {
	var mv client.Moves
	err := m.call(ctx, func(cl *client.Client) error {
		var err error
		mv, err = cl.ListMoves(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []nemesis.Move
	for _, rm := range mv.Moves {
		done := rm.VotersKnown() && len(rm.AddedVoters) == len(rm.Added) && len(rm.RemovedVoters) == 0
		out = append(out, nemesis.Move{Group: rm.Group, Added: m.indexes(rm.Added), Removed: m.indexes(rm.Removed), Done: done})
	}
	return out, nil
}

// indexes maps node ids to their indexes in the cluster.
func (m moves) indexes(ids []string) []int {
	var out []int
	for _, id := range ids {
		if i := slices.IndexFunc(m.c.Nodes, func(nd *e2e.Node) bool { return nd.ID == id }); i >= 0 {
			out = append(out, i)
		}
	}
	return out
}
