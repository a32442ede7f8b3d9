package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/peer"
	"github.com/logd-dev/logd/replication/catchup"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
)

// TestCreatePartitionsRestart grows a topic before and after a snapshot,
// and restarts the node: it comes back with the grown count and every
// record, from the snapshot and the Raft log after it. A refused growth
// changes nothing.
func TestCreatePartitionsRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	n := openTestNode(t, ctx, dir)
	b := NewBackend(n)
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "g", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	appendTo := func(n *Node, p int32, v string) {
		t.Helper()
		bases, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "g", Batches: []fsm.PartitionBatch{{Partition: p, Batch: mustBatch(t, v)}}})
		if err != nil {
			t.Fatalf("append to g-%d: %v", p, err)
		}
		if p > 0 && bases[0] != 0 {
			t.Fatalf("first record of new partition %d at offset %d", p, bases[0])
		}
	}
	appendTo(n, 0, "p0")
	if err := b.ValidateCreatePartitions(backend.CreatePartitions{Name: "g", Count: 3}); err != nil {
		t.Fatalf("validate a growth to 3: %v", err)
	}
	if tp, _ := n.FSM().Topic("g"); len(tp.Partitions) != 1 {
		t.Fatal("a validation grew the topic")
	}
	info, err := b.CreatePartitions(ctx, backend.CreatePartitions{Name: "g", Count: 3})
	if err != nil || info.Partitions != 3 {
		t.Fatalf("grow to 3: %+v, %v", info, err)
	}
	appendTo(n, 2, "p2")
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreatePartitions(ctx, backend.CreatePartitions{Name: "g", Count: 4}); err != nil {
		t.Fatal(err)
	}
	appendTo(n, 3, "p3")
	applied := n.FSM().AppliedIndex()
	for _, c := range []backend.CreatePartitions{{Name: "g", Count: 2}, {Name: "g", Count: 10_001}} {
		if err := b.ValidateCreatePartitions(c); !errors.Is(err, backend.ErrPartitionCount) {
			t.Errorf("validate a growth to %d: %v", c.Count, err)
		}
		if _, err := b.CreatePartitions(ctx, c); !errors.Is(err, backend.ErrPartitionCount) || !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("grow to %d: %v", c.Count, err)
		}
	}
	if info, err := b.CreatePartitions(ctx, backend.CreatePartitions{Name: "g", Count: 4}); err != nil || info.Partitions != 4 {
		t.Fatalf("grow to the count it has: %+v, %v", info, err)
	}
	if n.FSM().AppliedIndex() != applied {
		t.Fatalf("refusals and a growth to the same count proposed entries: applied %d, was %d", n.FSM().AppliedIndex(), applied)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n = openTestNode(t, ctx, dir)
	defer n.Close()
	tp, err := n.FSM().Topic("g")
	if err != nil || len(tp.Partitions) != 4 {
		t.Fatalf("after restart: %v", err)
	}
	want := []string{"[p0]", "[]", "[p2]", "[p3]"}
	for p, w := range want {
		if got := fmt.Sprint(fsmtest.ReadAll(t, n.FSM(), "g", int32(p))); got != w {
			t.Errorf("g-%d after restart: %s, want %s", p, got, w)
		}
	}
}

// TestCreatePartitionsFollower: a node that joins after a growth applies
// it from the Raft log and holds the new partitions' records; a growth
// while it is a member reaches it at once.
func TestCreatePartitionsFollower(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newJoinCluster(t)
	l := c.open(ctx, "n1", true)
	if _, err := NewBackend(l).createTopic(ctx, fsm.CreateTopic{Name: "g", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewBackend(l).createPartitions(ctx, fsm.CreatePartitions{Name: "g", Count: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewBackend(l).appendCommand(ctx, fsm.Append{Topic: "g", Batches: []fsm.PartitionBatch{{Partition: 1, Batch: mustBatch(t, "one")}}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Snapshot(); err != nil {
		t.Fatal(err)
	}
	j := c.open(ctx, "n2", false)
	if err := l.Join(ctx, joinRequest(j), c.probe); err != nil {
		t.Fatal(err)
	}
	if _, err := NewBackend(l).createPartitions(ctx, fsm.CreatePartitions{Name: "g", Count: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewBackend(l).appendCommand(ctx, fsm.Append{Topic: "g", Batches: []fsm.PartitionBatch{{Partition: 2, Batch: mustBatch(t, "two")}}}); err != nil {
		t.Fatal(err)
	}
	waitCond(t, ctx, "n2 applies what n1 did", func() bool { return j.FSM().AppliedIndex() >= l.FSM().AppliedIndex() })
	tp, err := j.FSM().Topic("g")
	if err != nil || len(tp.Partitions) != 3 {
		t.Fatalf("g on n2: %v", err)
	}
	for p, w := range []string{"[]", "[one]", "[two]"} {
		if got := fmt.Sprint(fsmtest.ReadAll(t, j.FSM(), "g", int32(p))); got != w {
			t.Errorf("g-%d on n2: %s, want %s", p, got, w)
		}
	}
}

// TestCreatePartitionsSnapshotInstall: a follower that installs a snapshot
// taken after a growth (it missed the entries) opens the grown count and
// fetches the new partitions' segments from the leader's segment handler,
// checking them, as for any partition.
func TestCreatePartitionsSnapshotInstall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := openSingleNode(t, ctx, Config{DataDir: t.TempDir(), APIAdvertise: ln.Addr().String(), SnapshotInterval: time.Hour,
		Fatal: func(err error) { t.Errorf("fatal: %v", err) }})
	defer n.Close()
	srv := &http.Server{Handler: NewBackend(n).SegmentHandler()}
	go srv.Serve(ln)
	defer srv.Close()
	waitCond(t, ctx, "n1 registered", func() bool { _, ok := n.FSM().NodeAddress("n1"); return ok })
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "g", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewBackend(n).createPartitions(ctx, fsm.CreatePartitions{Name: "g", Count: 3}); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		if _, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "g", Batches: []fsm.PartitionBatch{{Partition: p, Batch: mustBatch(t, fmt.Sprint("v", p))}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	snap := fsmtest.Snapshot(t, n.FSM())
	// Without peer TLS, the segments go only to a caller that proves the
	// cluster secret (docs/security.md, "Peers").
	// The fetcher asks again until its timeout (a peer may refuse for a
	// while): a short one.
	stranger, _ := fsmtest.New(t, t.TempDir(), catchup.NewSegmentFetcher(catchup.NewSegmentClient(peer.HTTP{}), catchup.FetcherOptions{Timeout: 2 * time.Second, Logger: fsmtest.Logger()}))
	if err := stranger.Restore(io.NopCloser(bytes.NewReader(snap))); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("install by a caller without the cluster secret: %v, want 403", err)
	}
	sc := catchup.NewSegmentClient(peer.HTTP{})
	signPeerCalls(sc, n.stores.port, Config{NodeID: "n2"})
	f, fatals := fsmtest.New(t, t.TempDir(), catchup.NewSegmentFetcher(sc, catchup.FetcherOptions{Timeout: time.Minute, Logger: fsmtest.Logger()}))
	if err := f.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatalf("install: %v", err)
	}
	tp, err := f.Topic("g")
	if err != nil || len(tp.Partitions) != 3 {
		t.Fatalf("g after the install: %v", err)
	}
	for p := range int32(3) {
		if got := fmt.Sprint(fsmtest.ReadAll(t, f, "g", p)); got != fmt.Sprintf("[v%d]", p) {
			t.Errorf("g-%d after the install: %s", p, got)
		}
	}
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}
}

// TestCreatePartitionsWakesClaimWait: a queue claim waiting on a topic
// wakes when the topic grows and delivers a record appended to a new
// partition, instead of sleeping through its whole wait (an hour here;
// the test's context ends long before).
func TestCreatePartitionsWakesClaimWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := openTestNode(t, ctx, t.TempDir())
	defer n.Close()
	b := NewBackend(n)
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "jobs", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewBackend(n).createQueueGroup(ctx, fsm.QueueCreate{Topic: "jobs", Group: "w"}); err != nil {
		t.Fatal(err)
	}
	type claimed struct {
		res backend.QueueClaimResult
		err error
	}
	done := make(chan claimed, 1)
	go func() {
		res, err := b.QueueClaimWait(ctx, backend.QueueClaim{Topic: "jobs", Group: "w", Max: 10, Lease: time.Minute}, time.Hour, nil)
		done <- claimed{res, err}
	}()
	// Nothing shows that the claim waits already; it does by the time the
	// growth is committed in every run seen (without the wake-up, 3 runs
	// of 3 failed), and where it did not, it reads the grown topic at once.
	if _, err := NewBackend(n).createPartitions(ctx, fsm.CreatePartitions{Name: "jobs", Count: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "jobs", Batches: []fsm.PartitionBatch{{Partition: 1, Batch: jobBatch(t, "j")}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-done:
		if c.err != nil || len(c.res.Records) != 1 || c.res.Records[0].Partition != 1 {
			t.Fatalf("claim: %+v, %v", c.res.Records, c.err)
		}
	case <-ctx.Done():
		t.Fatal("the claim still waits after the growth and an append to the new partition")
	}
}
