package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
)

// TestBackupRestore: a backup saved with logctl from a running node after
// a workload over every kind of state (keyed records with idempotency keys
// in several partitions, a compacted topic with a tombstone, a consumer
// group's committed offsets, a queue group with acked, in-flight and
// dead-lettered records, a token and an ACL), restored with logd restore
// into a new data dir after the old one is wiped, starts as a new
// single-node cluster holding all of it: the same records at the same
// offsets, the same group offsets and queue state, a retried keyed produce
// still answered as a duplicate, an in-flight record still acked with the
// token it was claimed under. A damaged or truncated copy of the file is
// refused by logd restore and logctl inspect, leaving the data dir empty.
func TestBackupRestore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Backups do not cover data groups yet (docs/operations.md, "Backup
	// and restore"); the restored node keeps its topics in the meta group
	// (it holds topics and no data groups).
	nd := e2e.StartNode(t, e2e.MetaGroupOnly()...)
	call := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	w := backupWorkload(t, ctx, nd)
	topics := w.topics
	before := captureState(t, ctx, nd, topics)

	file := filepath.Join(t.TempDir(), "backup.logd")
	out := e2e.Logctl(t, nd, "cluster", "snapshot", "save", file)
	if !strings.Contains(out, "saved "+file) {
		t.Fatalf("save printed %q", out)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v, %v (want mode 0600: it holds token hashes)", fi, err)
	}
	if out := e2e.Logctl(t, nd, "cluster", "snapshot", "inspect", file); !strings.Contains(out, "orders") || !strings.Contains(out, "Verified:") {
		t.Fatalf("inspect printed %q", out)
	}

	// Wipe the node, as a lost machine.
	nd.Stop()
	call("wipe", os.RemoveAll(nd.DataDir))

	r := e2e.NewNode(t, "r1")
	good, err := os.ReadFile(file)
	call("read backup", err)
	for name, damaged := range map[string][]byte{
		"truncated": good[:len(good)-100],
		"flipped":   flipped(good, len(good)/2),
	} {
		bad := filepath.Join(t.TempDir(), name+".logd")
		call("write "+name, os.WriteFile(bad, damaged, 0o600))
		if out, err := restoreCmd(bad, r).CombinedOutput(); err == nil {
			t.Fatalf("restore of a %s backup succeeded:\n%s", name, out)
		}
		if entries, _ := os.ReadDir(r.DataDir); len(entries) != 0 {
			t.Fatalf("restore of a %s backup left %d entries in the data dir", name, len(entries))
		}
		cmd := exec.Command(e2e.LogctlBinary(t), "cluster", "snapshot", "inspect", bad)
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Fatalf("inspect of a %s backup succeeded:\n%s", name, out)
		}
	}
	if out, err := restoreCmd(file, r).CombinedOutput(); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	r.Start()

	after := captureState(t, ctx, r, topics)
	for _, k := range sortedKeys(before) {
		if before[k] != after[k] {
			t.Errorf("%s after restore:\n%s\nbefore:\n%s", k, after[k], before[k])
		}
	}
	checkRestoredWrites(t, ctx, r, w)

	// A node joins the restored cluster: it installs the restored
	// snapshot, fetches the segments from the restored node (registered
	// only after the restore, so the snapshot is renewed) and serves the
	// same records.
	j2 := e2e.NewNode(t, "r2")
	j2.Launch(r.Listen)
	c := &e2e.Cluster{T: t, Nodes: []*e2e.Node{r, j2}}
	c.WaitVoters(ctx, 2)
	c.Converge(ctx)
	for name, parts := range topics {
		if got, want := e2e.Render(j2.ReadAll(ctx, name, parts)), e2e.Render(r.ReadAll(ctx, name, parts)); got != want {
			t.Errorf("%s on the joined node:\n%s\nwant:\n%s", name, got, want)
		}
	}
	// Asked of a follower, logctl is sent to the leader, which writes it.
	file2 := filepath.Join(t.TempDir(), "again.logd")
	follower := j2
	if st, err := j2.Status(ctx); err == nil && st.State == "Leader" {
		follower = r
	}
	if out := e2e.Logctl(t, follower, "cluster", "snapshot", "save", file2, "-o", "json"); !strings.Contains(out, `"node_id"`) {
		t.Fatalf("save through a follower printed %q", out)
	}
	if out := e2e.Logctl(t, follower, "cluster", "snapshot", "inspect", file2); !strings.Contains(out, "Cluster:        r1") {
		t.Fatalf("inspect of the new cluster's backup printed %q", out)
	}
}

// TestBackupRestoreDataGroups: TestBackupRestore's workload on a node
// with two data groups (--data-groups-per-node 2), so its topics are
// placed over them: logctl saves a backup with both groups' parts and
// inspects it, and logd restore builds a node that, started as a new
// cluster, runs both groups alone and holds the same records, group
// offsets, queue state, tokens and ACLs, takes the same retried and
// leased writes, and saves a backup again. A node that joins it takes a
// replica of each group and serves the same records.
func TestBackupRestoreDataGroups(t *testing.T) {
	e2e.ParallelShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nd := e2e.StartNode(t, "--data-groups-per-node", "2")
	waitLeadsGroups(t, ctx, nd, 2)
	w := backupWorkload(t, ctx, nd)
	before := captureState(t, ctx, nd, w.topics)

	file := filepath.Join(t.TempDir(), "backup.logd")
	var info client.SnapshotInfo
	if err := json.Unmarshal([]byte(e2e.Logctl(t, nd, "cluster", "snapshot", "save", file, "-o", "json")), &info); err != nil || info.DataGroups != 2 {
		t.Fatalf("save: %+v, %v; want 2 data groups", info, err)
	}
	if out := e2e.Logctl(t, nd, "cluster", "snapshot", "inspect", file); !strings.Contains(out, "DATA GROUP") || !strings.Contains(out, "orders") {
		t.Fatalf("inspect printed %q", out)
	}
	nd.Stop()

	// The restored node places the nodes that join: it runs with the
	// old cluster's --data-groups-per-node.
	r := e2e.NewNode(t, "r1", "--data-groups-per-node", "2")
	if out, err := restoreCmd(file, r).CombinedOutput(); err != nil || !strings.Contains(string(out), "2 data groups") {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	r.Start()
	waitLeadsGroups(t, ctx, r, 2)
	after := captureState(t, ctx, r, w.topics)
	for _, k := range sortedKeys(before) {
		if before[k] != after[k] {
			t.Errorf("%s after restore:\n%s\nbefore:\n%s", k, after[k], before[k])
		}
	}
	checkRestoredWrites(t, ctx, r, w)
	if err := json.Unmarshal([]byte(e2e.Logctl(t, r, "cluster", "snapshot", "save", filepath.Join(t.TempDir(), "again.logd"), "-o", "json")), &info); err != nil || info.DataGroups != 2 || info.NodeID != "r1" {
		t.Fatalf("a backup of the restored node: %+v, %v", info, err)
	}

	// A node that joins takes a replica of each group: it catches up
	// from the restored node and votes, and serves the same records.
	j2 := e2e.NewNode(t, "r2", "--data-groups-per-node", "2")
	j2.Launch(r.Listen)
	e2e.WaitFor(t, ctx, "r2 votes in every restored data group", func() bool {
		st, err := clusterStatus(t, r)
		if err != nil || len(st.DataGroups) < 2 {
			return false
		}
		for _, g := range st.DataGroups[:2] {
			v := slices.Clone(g.Voters)
			slices.Sort(v)
			if !slices.Equal(v, []string{"r1", "r2"}) || g.Lag != 0 {
				return false
			}
		}
		return true
	})
	// Balancing may hand a group's leadership to r2 now: while it moves,
	// a read is unavailable (a client retries it), never different.
	for name, parts := range w.topics {
		want := e2e.Render(r.ReadAll(ctx, name, parts))
		var got string
		e2e.WaitFor(t, ctx, "r2 reads "+name, func() bool {
			recs, err := j2.TryReadAll(ctx, name, parts)
			if connect.CodeOf(err) == connect.CodeUnavailable {
				return false
			} else if err != nil {
				t.Fatal(err)
			}
			got = e2e.Render(recs)
			return true
		})
		if got != want {
			t.Errorf("%s on the joined node:\n%s\nwant:\n%s", name, got, want)
		}
	}
}

// waitLeadsGroups waits until nd, a single node, leads n data groups.
func waitLeadsGroups(t *testing.T, ctx context.Context, nd *e2e.Node, n int) {
	t.Helper()
	e2e.WaitFor(t, ctx, fmt.Sprintf("%s leads %d data groups", nd.ID, n), func() bool {
		st, err := clusterStatus(t, nd)
		if err != nil || len(st.DataGroups) != n {
			return false
		}
		for _, g := range st.DataGroups {
			if g.Leader != nd.ID {
				return false
			}
		}
		return true
	})
}

// restoreCmd is logd restore of file into nd's data dir, as nd.
func restoreCmd(file string, nd *e2e.Node) *exec.Cmd {
	return exec.Command(e2e.Logd(), "restore", "--from", file, "--data-dir", nd.DataDir, "--node-id", nd.ID, "--raft-addr", nd.Raft)
}

func flipped(b []byte, i int) []byte {
	d := bytes.Clone(b)
	d[i] ^= 0x10
	return d
}

// captureState renders what a restore must bring back, by name: each
// topic's records, the group's committed offsets, the queue group's
// per-partition state (without ages and rates, which move with the
// clock), the tokens and the ACLs.
func captureState(t *testing.T, ctx context.Context, nd *e2e.Node, topics map[string]int32) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, parts := range topics {
		var b strings.Builder
		for p, recs := range nd.ReadAll(ctx, name, parts) {
			for _, r := range recs {
				fmt.Fprintf(&b, "%d@%d key=%q value=%q headers=%d ts=%d\n", p, r.Offset, r.Key, r.Value, len(r.Headers), r.TimestampMs)
			}
		}
		out["topic "+name] = sortLines(b.String())
	}
	g, err := nd.RPC.DescribeGroup(ctx, connect.NewRequest(&logdv1.DescribeGroupRequest{Group: "billing"}))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, p := range g.Msg.Partitions {
		fmt.Fprintf(&b, "%s-%d committed=%d\n", p.Topic, p.Partition, p.CommittedOffset)
	}
	out["group billing"] = sortLines(b.String())
	q, err := nd.RPC.DescribeQueueGroup(ctx, connect.NewRequest(&logdv1.DescribeQueueGroupRequest{Topic: "jobs", Group: "workers"}))
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	for _, p := range q.Msg.Partitions {
		p = proto.Clone(p).(*logdv1.QueuePartitionState)
		p.OldestReadyAgeMs, p.OldestInFlightAgeMs = 0, 0
		p.AckedPerSec, p.NackedPerSec, p.ExpiredPerSec, p.DeadLetteredPerSec = 0, 0, 0, 0
		fmt.Fprintln(&b, protojson.Format(p))
	}
	fmt.Fprintf(&b, "dead letters %d paused %v\n", q.Msg.DeadLetterRecords, q.Msg.Paused)
	out["queue workers"] = b.String()
	tok, err := nd.RPC.ListTokens(ctx, connect.NewRequest(&logdv1.ListTokensRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	for _, ti := range tok.Msg.Tokens {
		fmt.Fprintln(&b, protojson.Format(ti))
	}
	out["tokens"] = sortLines(b.String())
	acls, err := nd.RPC.ListACLs(ctx, connect.NewRequest(&logdv1.ListACLsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	for _, a := range acls.Msg.Acls {
		fmt.Fprintln(&b, protojson.Format(a))
	}
	out["acls"] = sortLines(b.String())
	if strings.TrimSpace(out["tokens"]) == "" || strings.TrimSpace(out["acls"]) == "" {
		t.Fatalf("no tokens or ACLs captured: %v", out)
	}
	return out
}

func sortLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}

// backupRun is what backupWorkload did, for the checks after a restore.
type backupRun struct {
	// topics are the topics it made, with their partitions.
	topics map[string]int32
	// firstOrder is where the first record of orders went.
	firstOrder *logdv1.RecordResult
	// inFlight are the records claimed and still leased (ten minutes).
	inFlight []*logdv1.ClaimedRecord
}

// backupWorkload makes, through nd, every kind of state a backup holds:
// keyed records with idempotency keys in several partitions, a compacted
// topic with a tombstone, a consumer group's committed offsets, a queue
// group with acked, in-flight and dead-lettered records, a token and an
// ACL.
func backupWorkload(t *testing.T, ctx context.Context, nd *e2e.Node) backupRun {
	t.Helper()
	call := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	e2e.CreateTopic(t, ctx, nd, "orders", 3, map[string]string{"segment.bytes": "1024"})
	e2e.CreateTopic(t, ctx, nd, "users", 1, map[string]string{"cleanup.policy": "compact"})
	e2e.CreateTopic(t, ctx, nd, "jobs", 2, nil)

	// Keyed records, each with an idempotency key.
	produce := func(topic string, recs ...*logdv1.Record) []*logdv1.RecordResult {
		t.Helper()
		r, err := nd.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: topic, Records: recs}))
		call("produce "+topic, err)
		return r.Msg.Results
	}
	rec := backupRecord
	var firstOrder *logdv1.RecordResult
	for i := range 60 {
		res := produce("orders", rec(fmt.Sprintf("customer-%d", i%7), fmt.Sprintf("order-%03d", i), fmt.Sprintf("order-%03d", i)))
		if i == 0 {
			firstOrder = res[0]
		}
	}
	produce("users", rec("alice", "v1", ""), rec("bob", "v1", ""), rec("alice", "v2", ""), rec("bob", "", ""))
	for i := range 10 {
		produce("jobs", rec(fmt.Sprintf("job-%d", i), fmt.Sprintf("job-%d", i), ""))
	}

	// A consumer group with committed offsets.
	j, err := nd.RPC.JoinGroup(ctx, connect.NewRequest(&logdv1.JoinGroupRequest{Group: "billing", MemberId: "m1", Topics: []string{"orders"}, SessionTimeoutMs: 60000}))
	call("join", err)
	_, err = nd.RPC.CommitOffsets(ctx, connect.NewRequest(&logdv1.CommitOffsetsRequest{Group: "billing", MemberId: "m1", Generation: j.Msg.Assignment.Generation,
		Offsets: []*logdv1.GroupOffset{{Topic: "orders", Partition: 0, Offset: 3}, {Topic: "orders", Partition: 1, Offset: 5}, {Topic: "orders", Partition: 2, Offset: 1}}}))
	call("commit", err)

	// A queue group: some acked, some in flight, some dead-lettered.
	_, err = nd.RPC.CreateQueueGroup(ctx, connect.NewRequest(&logdv1.CreateQueueGroupRequest{Topic: "jobs", Group: "workers"}))
	call("create queue group", err)
	cl, err := nd.RPC.Claim(ctx, connect.NewRequest(&logdv1.ClaimRequest{Topic: "jobs", Group: "workers", MaxRecords: 6, LeaseMs: 10 * 60 * 1000}))
	call("claim", err)
	if len(cl.Msg.Records) != 6 {
		t.Fatalf("claimed %d records, want 6", len(cl.Msg.Records))
	}
	recs := cl.Msg.Records
	_, err = nd.RPC.Ack(ctx, connect.NewRequest(&logdv1.AckRequest{Topic: "jobs", Group: "workers", Tokens: []string{recs[0].Token, recs[1].Token}}))
	call("ack", err)
	_, err = nd.RPC.Nack(ctx, connect.NewRequest(&logdv1.NackRequest{Topic: "jobs", Group: "workers",
		Nacks: []*logdv1.QueueNack{{Token: recs[2].Token, Permanent: true, Error: "poison"}}}))
	call("nack", err)
	inFlight := recs[3:] // leased for ten minutes

	// A token and an ACL.
	_, err = nd.RPC.CreateToken(ctx, connect.NewRequest(&logdv1.CreateTokenRequest{Principal: "User:alice", Description: "backup test"}))
	call("create token", err)
	_, err = nd.RPC.CreateACLs(ctx, connect.NewRequest(&logdv1.CreateACLsRequest{Acls: []*logdv1.ACL{
		{Principal: "User:alice", Resource: "topic", Pattern: "literal", Name: "orders", Operation: "read", Effect: "allow"}}}))
	call("create acl", err)

	return backupRun{topics: map[string]int32{"orders": 3, "users": 1, "jobs": 2, "jobs.workers.dlq": 1}, firstOrder: firstOrder, inFlight: inFlight}
}

// checkRestoredWrites checks the writes a node restored from a backup of
// w's workload takes: a retried keyed produce is a duplicate of the
// original, the records in flight are acked with their tokens, and new
// records go after the restored ones.
func checkRestoredWrites(t *testing.T, ctx context.Context, r *e2e.Node, w backupRun) {
	t.Helper()
	call := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	rec := backupRecord
	firstOrder, inFlight := w.firstOrder, w.inFlight
	// A retried keyed produce is still a duplicate of the original.
	res, err := r.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "orders",
		Records: []*logdv1.Record{rec("customer-0", "order-000", "order-000")}}))
	call("retried produce", err)
	if got := res.Msg.Results[0]; !got.Duplicate || got.Partition != firstOrder.Partition || got.Offset != firstOrder.Offset {
		t.Fatalf("retried produce after restore: %v, want a duplicate of %v", got, firstOrder)
	}
	// The in-flight records keep their leases and tokens.
	var tokens []string
	for _, c := range inFlight {
		tokens = append(tokens, c.Token)
	}
	_, err = r.RPC.Ack(ctx, connect.NewRequest(&logdv1.AckRequest{Topic: "jobs", Group: "workers", Tokens: tokens}))
	call("ack in-flight records after restore", err)
	// New writes go after the restored ones.
	res, err = r.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "users", Records: []*logdv1.Record{rec("carol", "v1", "")}}))
	call("produce after restore", err)
	if res.Msg.Results[0].Offset != 4 {
		t.Fatalf("first record after restore at offset %d, want 4", res.Msg.Results[0].Offset)
	}
}

// backupRecord is a keyed record with an idempotency key (none for "");
// a value "" is a tombstone.
func backupRecord(key, value, idem string) *logdv1.Record {
	r := &logdv1.Record{Key: []byte(key), IdempotencyKey: idem}
	if value != "" {
		r.Value = []byte(value)
	}
	return r
}
