package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/peer"
	"github.com/logd-dev/logd/replication/catchup"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
)

// TestCatchUpAfterCompaction: once the leader compacted segments its
// snapshot lists, its segment handler answers that they changed (not that
// it is behind), a follower installing that snapshot gives up at once
// instead of retrying until its timeout, and the leader renews its
// snapshot, whose segments it serves.
func TestCatchUpAfterCompaction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	clock := time.UnixMilli(1_700_000_000_000)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	n, err := Open(Config{NodeID: "n1", DataDir: dir, RaftBind: "127.0.0.1:0", Bootstrap: true, Logger: fsmtest.Logger(),
		RaftLogLevel: "error", Fatal: func(err error) { t.Errorf("fatal: %v", err) }, Now: now,
		CleanerInterval: time.Hour, SnapshotInterval: time.Hour, APIAdvertise: ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	srv := &http.Server{Handler: NewBackend(n).SegmentHandler()}
	go srv.Serve(ln)
	defer srv.Close()
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("waiting for %s", what)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	waitUntil("a registered leader", func() bool { _, ok := n.FSM().NodeAddress("n1"); return n.IsLeader() && ok })
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "c", Partitions: 1, Config: map[string]string{
		fsm.ConfigSegmentBytes: "100", fsm.ConfigCleanupPolicy: "compact", fsm.ConfigDeleteRetentionMs: "0"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if _, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "c", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: keyedBatch(t, now().UnixMilli(), fmt.Sprint("k", i%2), fmt.Sprint("v", i))}}}); err != nil {
			t.Fatal(err)
		}
	}
	tp, _ := n.FSM().Topic("c")
	p, _ := n.FSM().Partition("c", 0)
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	snap := fsmtest.Snapshot(t, n.FSM()) // what the snapshot lists, as a follower receives it
	listed := p.Log().Segments()
	if n.FSM().SegmentsChangedSinceSnapshot() {
		t.Fatal("segments changed right after a snapshot")
	}

	advance(time.Second)
	if err := n.Clean(ctx); err != nil {
		t.Fatal(err)
	}
	compactedAt := n.FSM().AppliedIndex()
	if n.FSM().CleanerCounters().Compactions == 0 {
		t.Fatal("nothing compacted")
	}
	client := catchup.NewSegmentClient(peer.HTTP{})
	signPeerCalls(client, n.stores.port, Config{NodeID: "n2"})
	addr := ln.Addr().String()
	ref := func(i int) catchup.SegmentRef {
		s := listed[i]
		return catchup.SegmentRef{Topic: "c", TopicIndex: tp.CreateIndex, Partition: 0, Base: s.BaseOffset, End: s.EndOffset, Bytes: s.Bytes}
	}
	// The first segment was compacted: both files are refused as changed.
	now0 := p.Log().Segments()[0]
	if now0.Bytes == listed[0].Bytes || !now0.Compacted {
		t.Fatalf("segment 0 not compacted: %+v, listed %+v", now0, listed[0])
	}
	if _, err := client.SegmentMeta(ctx, addr, ref(0)); !errors.Is(err, backend.ErrSegmentGone) {
		t.Fatalf("meta of a compacted segment: %v", err)
	}
	if _, err := client.SegmentData(ctx, addr, ref(0)); !errors.Is(err, backend.ErrSegmentGone) {
		t.Fatalf("data of a compacted segment: %v", err)
	}
	// As it is now, it is served.
	cur := catchup.SegmentRef{Topic: "c", TopicIndex: tp.CreateIndex, Partition: 0, Base: now0.BaseOffset, End: now0.EndOffset, Bytes: now0.Bytes}
	rc, err := client.SegmentData(ctx, addr, cur)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || int64(len(b)) != now0.Bytes {
		t.Fatalf("current segment: %d bytes, %v", len(b), err)
	}
	// A caller of an older build sends no end: a short file is 416 as
	// before, never a compacted prefix.
	old := ref(0)
	old.End = -1
	if _, err := client.SegmentData(ctx, addr, old); err == nil || errors.Is(err, backend.ErrSegmentGone) || !strings.Contains(err.Error(), "416") {
		t.Fatalf("data without end: %v", err)
	}
	// A segment this node does not have yet (it is behind) is not gone.
	ahead := ref(len(listed) - 1)
	ahead.Base, ahead.End = p.Log().EndOffset()+10, p.Log().EndOffset()+11
	if _, err := client.SegmentMeta(ctx, addr, ahead); err == nil || errors.Is(err, backend.ErrSegmentGone) {
		t.Fatalf("a segment past the end: %v", err)
	}

	// A follower installing the stale snapshot gives up without waiting
	// for its timeout.
	f, _ := fsmtest.New(t, t.TempDir(), catchup.NewSegmentFetcher(client, catchup.FetcherOptions{Timeout: time.Minute, Logger: fsmtest.Logger()}))
	err = f.Restore(io.NopCloser(bytes.NewReader(snap)))
	if !errors.Is(err, backend.ErrSegmentGone) || strings.Contains(err.Error(), "within") {
		t.Fatalf("restore of a stale snapshot: %v", err)
	}

	// The leader renews its snapshot, though nothing was written since.
	waitUntil("a snapshot after the compaction", func() bool {
		idx, _ := strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64)
		return idx >= compactedAt && !n.FSM().SegmentsChangedSinceSnapshot()
	})
	snap = fsmtest.Snapshot(t, n.FSM())
	f2, _ := fsmtest.New(t, t.TempDir(), catchup.NewSegmentFetcher(client, catchup.FetcherOptions{Timeout: time.Minute, Logger: fsmtest.Logger()}))
	if err := f2.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatalf("restore of the renewed snapshot: %v", err)
	}
	if got, want := liveKV(t, f2, "c"), liveKV(t, n.FSM(), "c"); strings.Join(got, ",") != strings.Join(want, ",") || len(got) == 0 {
		t.Fatalf("follower reads %v, leader %v", got, want)
	}
}
