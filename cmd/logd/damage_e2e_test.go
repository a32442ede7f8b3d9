package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/internal/e2e"
)

// TestClusterDamagedRaftLog is T8 of docs/faults.md for the Raft log: while a
// follower is down, one byte of an idempotency key in its raft.db is
// changed (bbolt checksums only its meta pages, so nothing below notices).
// On restart the follower replays its log, finds that entry's checksum
// wrong and exits with status 70, instead of holding a key no other
// replica holds (a retry of the real key answered there would append a
// duplicate). The other two nodes go on acknowledging, and every
// acknowledged record is on both.
func TestClusterDamagedRaftLog(t *testing.T) {
	e2e.ParallelShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The damage is made in raft-boltdb's file, so the log is kept there
	// (raft-wal's frames carry a CRC of their own).
	// The records in the meta group's raft.db.
	c := e2e.NewCluster(t, 3, append(e2e.MetaGroupOnly(), "--raft-log-store", "boltdb")...)
	e2e.CreateTopic(t, ctx, c.Nodes[0], "d", 1, nil)
	leader := c.Leader(ctx)
	victim := c.Nodes[2]
	if victim == leader {
		victim = c.Nodes[1]
	}
	attempted := map[string]bool{}
	var acks []e2e.Ack
	keys := map[int]string{}
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			v := fmt.Sprintf("d-%d", i)
			// One keyed record per call: the entry holds the key whole.
			keys[i] = fmt.Sprintf("t8-key-%04d-%016x", i, rand.Uint64())
			attempted[v] = true
			resp, err := leader.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "d",
				Records: []*logdv1.Record{{Value: []byte(v), IdempotencyKey: keys[i]}}}))
			if err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			acks = append(acks, e2e.Ack{Partition: resp.Msg.Results[0].Partition, Offset: resp.Msg.Results[0].Offset, Value: v})
		}
	}
	produce(0, 40)
	c.Converge(ctx)
	victim.Kill()

	path := filepath.Join(victim.DataDir, "raft", "raft.db")
	db, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// bbolt may still hold an older copy of the page in free space: change
	// every copy, so the key read back is the damaged one.
	key := []byte(keys[20])
	n := bytes.Count(db, key)
	if n == 0 {
		t.Fatalf("key %s not found in %s", key, path)
	}
	db = bytes.ReplaceAll(db, key, append(key[:len(key)-1:len(key)-1], 'z'))
	if err := os.WriteFile(path, db, 0o644); err != nil {
		t.Fatal(err)
	}

	victim.Launch("")
	exited := make(chan error, 1)
	cmd := victim.Cmd
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		victim.Cmd = nil
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 70 {
			t.Fatalf("%s ended with %v, want exit status 70", victim.ID, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still runs 30 s after restarting over a damaged Raft log", victim.ID)
	}
	logs, _ := os.ReadFile(victim.Logs.Name())
	if !strings.Contains(string(logs), "raft log entry damaged on this node") {
		t.Fatalf("%s exited without naming the damage:\n%s", victim.ID, e2e.Tail(string(logs), 2000))
	}

	// Two of three nodes still acknowledge, and hold everything.
	produce(40, 60)
	var healthy []*e2e.Node
	for _, nd := range c.Nodes {
		if nd != victim {
			healthy = append(healthy, nd)
		}
	}
	c.ConvergeNodes(ctx, healthy)
	for _, nd := range healthy {
		e2e.Check(t, nd.ReadAll(ctx, "d", 1), acks, attempted)
	}
	// The real key is still a duplicate on the nodes that serve.
	resp, err := leader.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "d",
		Records: []*logdv1.Record{{Value: []byte("d-20"), IdempotencyKey: keys[20]}}}))
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.Msg.Results[0]; !r.Duplicate || r.Offset != acks[20].Offset {
		t.Fatalf("retry of record 20's key: %+v, want a duplicate at offset %d", r, acks[20].Offset)
	}
	t.Logf("%d copies of the key changed in %s; it exited with status 70; %d records acknowledged, all on %s and %s",
		n, victim.ID, len(acks), healthy[0].ID, healthy[1].ID)
}

// snapshotDirs lists a node's complete Raft snapshots, oldest first
// (their names are term-index-time).
func snapshotDirs(t *testing.T, dataDir string) []string {
	t.Helper()
	all, err := filepath.Glob(filepath.Join(dataDir, "raft", "snapshots", "*-*-*"))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, d := range all {
		if strings.HasSuffix(d, ".tmp") { // one being written
			continue
		}
		// One Raft was removing (it keeps the newest two) when the node
		// was killed: its state is gone already, and Raft skips it.
		if _, err := os.Stat(filepath.Join(d, "state.bin")); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		dirs = append(dirs, d)
	}
	slices.SortFunc(dirs, func(a, b string) int {
		var ta, ia, tb, ib, xa, xb int64
		fmt.Sscanf(filepath.Base(a), "%d-%d-%d", &ta, &ia, &xa)
		fmt.Sscanf(filepath.Base(b), "%d-%d-%d", &tb, &ib, &xb)
		return cmp.Or(cmp.Compare(ia, ib), cmp.Compare(xa, xb))
	})
	return dirs
}

// flipByte flips one bit of a file, at offset len/div.
func flipByte(t *testing.T, path string, div int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/div] ^= 0x10
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedSnapshot is T8 of docs/faults.md for snapshots, on one node. With its
// newest snapshot damaged, the node restores the one before and replays
// its Raft log from there (hashicorp/raft checks a CRC-64 of each snapshot
// file): every acknowledged record, and every idempotency key, is still
// there. With every snapshot damaged it refuses to start, and its topics'
// files are left as they were.
func TestDamagedSnapshot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The meta group's snapshots: its partitions' records drive them.
	p := e2e.StartNode(t, append(e2e.MetaGroupOnly(), "--snapshot-threshold", "16", "--snapshot-interval", "100ms")...)
	if _, err := p.RPC.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "s", Partitions: 2})); err != nil {
		t.Fatal(err)
	}
	attempted := map[string]bool{}
	var acks []e2e.Ack
	// Until two snapshots exist, then 20 records more, which only the Raft
	// log holds.
	extra := -1
	for i := 0; extra != 0; i++ {
		if i == 5000 {
			t.Fatal("fewer than two snapshots after 5000 records")
		}
		v := fmt.Sprintf("s-%d", i)
		attempted[v] = true
		resp, err := p.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "s",
			Records: []*logdv1.Record{{Value: []byte(v), IdempotencyKey: "key-" + v}}}))
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, e2e.Ack{Partition: resp.Msg.Results[0].Partition, Offset: resp.Msg.Results[0].Offset, Value: v})
		if extra < 0 && len(snapshotDirs(t, p.DataDir)) >= 2 {
			extra = 20
		} else if extra > 0 {
			extra--
		}
	}
	p.Kill()
	dirs := snapshotDirs(t, p.DataDir)
	flipByte(t, filepath.Join(dirs[len(dirs)-1], "state.bin"), 2)

	p.Start()
	e2e.Check(t, p.ReadAll(ctx, "s", 2), acks, attempted)
	for _, a := range acks {
		resp, err := p.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "s",
			Records: []*logdv1.Record{{Value: []byte(a.Value), IdempotencyKey: "key-" + a.Value}}}))
		if err != nil {
			t.Fatal(err)
		}
		if r := resp.Msg.Results[0]; !r.Duplicate || r.Partition != a.Partition || r.Offset != a.Offset {
			t.Fatalf("retry of %s after the fallback: %+v, want a duplicate at %d/%d", a.Value, r, a.Partition, a.Offset)
		}
	}
	logs, _ := os.ReadFile(p.Logs.Name())
	if !strings.Contains(string(logs), "CRC mismatch") {
		t.Fatal("the node started without reporting the damaged snapshot; the test did not exercise the fallback")
	}

	p.Kill()
	before := segmentSums(t, p.DataDir)
	for _, d := range snapshotDirs(t, p.DataDir) {
		flipByte(t, filepath.Join(d, "state.bin"), 3) // not the bit flipped above: that would mend it
	}
	startCtx, cancelStart := context.WithTimeout(ctx, 30*time.Second)
	defer cancelStart()
	p.Cmd = exec.CommandContext(startCtx, e2e.Logd(), p.Cmdline("")...)
	out, err := p.Cmd.CombinedOutput()
	p.Cmd = nil
	if err == nil || !strings.Contains(string(out), "failed to load any existing snapshots") {
		t.Fatalf("started over damaged snapshots only: %v\n%s", err, e2e.Tail(string(out), 2000))
	}
	if after := segmentSums(t, p.DataDir); fmt.Sprint(after) != fmt.Sprint(before) || len(after) == 0 {
		t.Fatalf("topic files changed by the refused start: %d files before, %d after", len(before), len(after))
	}
}
