package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/logd-dev/logd/group"
)

func groupsJSON(t *testing.T, f *FSM) string {
	t.Helper()
	b, err := json.Marshal(f.ConsumerGroups())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// groupScript is a command script over topic "orders" (2 partitions, 3
// records in partition 0) exercising every group command type.
func groupScript(t *testing.T) ([][]byte, []error) {
	now := int64(1_700_000_000_000_000_000)
	sec := int64(time.Second)
	tp0 := group.TopicPartition{Topic: "orders", Partition: 0}
	cmds := [][]byte{
		createCmd(t, "orders", 2, now),
		encodeAppend(now, Append{Topic: "orders", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, "created", "paid", "shipped")}}}),
		mustJSON(t, CmdGroupJoin, now, GroupJoin{Group: "billing", Member: "a", Topics: []string{"orders"}, SessionTimeoutMs: 2000}),
		mustJSON(t, CmdGroupJoin, now, GroupJoin{Group: "analytics", Member: "x", Topics: []string{"orders"}, SessionTimeoutMs: 2000}),
		mustJSON(t, CmdGroupCommit, now+sec, GroupCommit{Group: "billing", Member: "a", Generation: 1, Offsets: []group.OffsetCommit{{TopicPartition: tp0, Offset: 2}}}),
		// Above the end: refused.
		mustJSON(t, CmdGroupCommit, now+sec, GroupCommit{Group: "billing", Member: "a", Generation: 1, Offsets: []group.OffsetCommit{{TopicPartition: tp0, Offset: 4}}}),
		mustJSON(t, CmdGroupJoin, now+sec, GroupJoin{Group: "billing", Member: "b", Topics: []string{"orders"}, SessionTimeoutMs: 2000}),
		mustJSON(t, CmdGroupHeartbeat, now+sec, GroupHeartbeat{Group: "billing", Member: "a", Released: []group.TopicPartition{{Topic: "orders", Partition: 1}}}),
		mustJSON(t, CmdGroupResetOffsets, now+2*sec, GroupResetOffsets{Group: "billing", Offsets: []group.OffsetCommit{{TopicPartition: tp0, Offset: 0}}}),
		// a's commit from before the reset is stale.
		mustJSON(t, CmdGroupCommit, now+2*sec, GroupCommit{Group: "billing", Member: "a", Generation: 2, Offsets: []group.OffsetCommit{{TopicPartition: tp0, Offset: 3}}}),
		mustJSON(t, CmdGroupAutoReset, now+2*sec, GroupAutoReset{Group: "billing", Member: "a", Generation: 4, Partition: tp0, From: 0, To: 1}),
		// x's session runs out; the analytics group can then be deleted,
		// billing cannot (b keeps heartbeating).
		mustJSON(t, CmdGroupHeartbeat, now+3*sec, GroupHeartbeat{Group: "billing", Member: "b"}),
		mustJSON(t, CmdGroupDelete, now+4*sec, GroupDelete{Group: "analytics"}),
		mustJSON(t, CmdGroupDelete, now+4*sec, GroupDelete{Group: "billing"}),
		mustJSON(t, CmdGroupLeave, now+5*sec, GroupLeave{Group: "billing", Member: "b"}),
	}
	want := make([]error, len(cmds))
	want[5] = group.ErrOffsetAboveEnd
	want[9] = group.ErrStaleGeneration
	want[13] = group.ErrConsumerGroupNotEmpty
	return cmds, want
}

func TestGroupApplyScript(t *testing.T) {
	cmds, want := groupScript(t)
	f, fatals := testFSM(t, t.TempDir())
	res := f.ApplyBatch(entries(cmds...))
	for i, r := range res {
		err, _ := r.(error)
		if !errors.Is(err, want[i]) || (want[i] == nil && err != nil) {
			t.Fatalf("command %d: result %v, want %v", i, r, want[i])
		}
	}
	if len(*fatals) > 0 {
		t.Fatal(*fatals)
	}
	if _, err := f.ConsumerGroup("analytics"); !errors.Is(err, group.ErrConsumerGroupNotFound) {
		t.Fatalf("analytics after delete: %v", err)
	}
	g, err := f.ConsumerGroup("billing")
	if err != nil {
		t.Fatal(err)
	}
	p0 := g.Topics["orders"].Partitions[0]
	if p0.Committed != 1 || p0.Skipped != 1 || p0.AutoResets != 1 || g.OffsetResets != 1 {
		t.Fatalf("billing orders-0: %+v, resets %d", p0, g.OffsetResets)
	}
	if len(g.Members) != 0 || g.State() != group.StateEmpty {
		t.Fatalf("billing members %v state %s, want empty", g.MemberIDs(), g.State())
	}
}

// TestGroupApplyDeterministicAndSnapshot applies the script on two FSMs
// (one entry at a time on the second), requires identical group state,
// and round-trips it through a snapshot manifest into a fresh FSM.
func TestGroupApplyDeterministicAndSnapshot(t *testing.T) {
	cmds, _ := groupScript(t)
	cmds = cmds[:12] // keep live members and both groups
	f1, _ := testFSM(t, t.TempDir())
	f1.ApplyBatch(entries(cmds...))
	dir := t.TempDir()
	f2, _ := testFSM(t, dir)
	for _, e := range entries(cmds...) {
		f2.apply(e)
	}
	want := groupsJSON(t, f1)
	if got := groupsJSON(t, f2); got != want {
		t.Fatalf("replicas differ:\n%s\n%s", want, got)
	}
	snap, err := f2.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := snap.writeTo(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(buf.Bytes(), []byte(`"groups":{"version":1`)) {
		t.Fatalf("manifest without versioned groups: %s", buf.String())
	}
	f2.Close()
	f3, _ := testFSM(t, dir)
	if err := f3.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	if got := groupsJSON(t, f3); got != want {
		t.Fatalf("restored state differs:\n%s\n%s", want, got)
	}
	// A manifest from before groups existed restores with none.
	f3.Close()
	f4, _ := testFSM(t, dir)
	old := *snap
	old.m.Groups = nil
	var b bytes.Buffer
	if err := old.writeTo(&b); err != nil {
		t.Fatal(err)
	}
	if err := f4.Restore(io.NopCloser(&b)); err != nil {
		t.Fatal(err)
	}
	if n := len(f4.ConsumerGroups()); n != 0 {
		t.Fatalf("%d groups restored from a manifest without groups", n)
	}
}
