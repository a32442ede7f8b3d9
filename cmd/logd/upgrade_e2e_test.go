package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/internal/e2e"
)

// upgradeFrom is the build TestClusterRollingUpgrade starts from: the
// last commit whose Raft port spoke only hashicorp/raft's own framing,
// one connection per Raft connection, without sessions or the cluster
// secret.
const upgradeFrom = "df32ba99fa90cb9ebd8930418d5ef55b9cc44fb8"

// buildPinned builds cmd/logd of commit from this clone's history into a
// temporary directory and returns the binary's path. A clone without
// the commit (a shallow one) fails the test: the upgrade is not checked
// then.
func buildPinned(t *testing.T, commit string) string {
	t.Helper()
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("find the repository: %v", err)
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", fmt.Sprintf("git archive --format=tar %s | tar -x -C %s", commit, src))
	archive.Dir = strings.TrimSpace(string(root))
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("commit %s, the build to upgrade from, is not in this clone (a shallow clone? git fetch --unshallow): %v\n%s", commit, err, out)
	}
	bin := filepath.Join(t.TempDir(), "logd-"+commit[:7])
	build := exec.Command("go", "build", "-o", bin, "./cmd/logd")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build logd at %s: %v\n%s", commit, err, out)
	}
	return bin
}

// TestClusterRollingUpgrade upgrades a running 3-node cluster of the
// pinned earlier build (upgradeFrom) to this one, one node at a time,
// followers first, while producers write: upgraded nodes talk Raft's own
// framing with the old ones and sessions with each other; once all run
// this build the cluster is handed a cluster secret, which every node
// then requires; no acknowledged record is lost and every node ends with
// the same records (docs/operations.md, "Rolling upgrade"). It builds the earlier commit,
// so it runs under make fault only; replication/transport's
// TestPreviousFraming checks both framings in make test.
func TestClusterRollingUpgrade(t *testing.T) {
	if !e2e.FaultLong() {
		t.Skip("builds an earlier commit and upgrades a 3-node cluster under load; runs under LOGD_FAULT_LONG=1 (make fault)")
	}
	old := buildPinned(t, upgradeFrom)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := &e2e.Cluster{T: t}
	for i := range 3 {
		nd := e2e.NewNode(t, fmt.Sprintf("n%d", i+1))
		nd.Binary = old
		c.Nodes = append(c.Nodes, nd)
	}
	c.Start()
	e2e.CreateTopic(t, ctx, c.Nodes[0], "up", 3, nil)

	ps := e2e.NewProducers(5)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for id, nd := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ps.Run(ctx, t, nd.Listen, "up", id, stop)
		}()
	}
	acked := func() int { acks, _, _, _ := ps.Results(); return len(acks) }
	// progress waits until the producers have more acknowledged records.
	progress := func(what string) {
		t.Helper()
		from := acked()
		e2e.WaitFor(t, ctx, what, func() bool { return acked() >= from+100 })
	}
	progress("writes on the old build")
	// upgrade restarts nd on this build and waits for the cluster.
	upgrade := func(nd *e2e.Node) {
		t.Helper()
		t.Logf("upgrading %s", nd.ID)
		nd.Stop()
		nd.Binary = ""
		nd.Launch("")
		c.Converge(ctx)
		progress("writes after upgrading " + nd.ID)
	}
	leader := c.Leader(ctx)
	var order []*e2e.Node
	for _, nd := range c.Nodes {
		if nd != leader {
			order = append(order, nd)
		}
	}
	first := order[0]
	upgrade(first)
	// The first upgraded node leads the old ones for a while: it dials
	// them in their framing, and they dial it in theirs.
	if _, err := leader.RPC.TransferLeadership(ctx, connect.NewRequest(&logdv1.TransferLeadershipRequest{NodeId: first.ID})); err != nil {
		t.Fatalf("transfer the leadership to %s: %v", first.ID, err)
	}
	e2e.WaitFor(t, ctx, first.ID+" leads", func() bool { return c.Leader(ctx) == first })
	progress("writes under an upgraded leader of old followers")
	upgrade(order[1])
	upgrade(leader)
	// Every member runs this build: the leader hands the cluster a
	// secret, and each node requires it once all registered it.
	secretOf := func(nd *e2e.Node) string {
		b, _ := os.ReadFile(filepath.Join(nd.DataDir, "cluster-secret"))
		return string(b)
	}
	e2e.WaitFor(t, ctx, "every node requires the same cluster secret", func() bool {
		first := secretOf(c.Nodes[0])
		for _, nd := range c.Nodes {
			if s := secretOf(nd); s != first || !strings.HasSuffix(s, "\nrequired\n") {
				return false
			}
		}
		return true
	})
	progress("writes once the secret is required")
	close(stop)
	wg.Wait()
	c.Converge(ctx)
	acks, attempted, _, _ := ps.Results()
	c.CheckEveryNode(ctx, "up", 3, acks, attempted)
	t.Logf("%d records acknowledged across the upgrade", len(acks))

	for _, nd := range c.Nodes {
		b, err := os.ReadFile(nd.Logs.Name())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "this cluster has no cluster secret yet") {
			t.Errorf("%s did not warn that its cluster has no cluster secret yet", nd.ID)
		}
	}
	b, err := os.ReadFile(first.Logs.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "the peer speaks the previous framing") {
		t.Errorf("%s, leading old nodes, never dialed them in their framing", first.ID)
	}
}
