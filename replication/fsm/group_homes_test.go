package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/log"
)

// twoGroups is a table of two data groups on one node.
func twoGroups(t *testing.T, base uint64) []byte {
	t.Helper()
	n1 := []string{"n1"}
	return mustEncode(t)(EncodeDataGroups(qnow, DataGroupsSet{Base: base, Nodes: n1,
		Groups: []DataGroup{{ID: 1, Replicas: n1, Bootstrap: n1}, {ID: 2, Replicas: n1, Bootstrap: n1}}}))
}

// nameHomed returns a group name with prefix that HashedHome puts in
// data group want of tab.
func nameHomed(t *testing.T, prefix string, tab DataGroupTable, want uint64) string {
	t.Helper()
	for i := range 1000 {
		if name := fmt.Sprintf("%s-%d", prefix, i); HashedHome(name, tab) == want {
			return name
		}
	}
	t.Fatalf("no name %s-N hashes to data group %d", prefix, want)
	return ""
}

// TestGroupPlace: the meta group records a group's home the first time
// it is asked, and never changes it: a group it holds (from before the
// level) stays at home 0, a new one goes to the data group its name
// hashes to, a group logd keeps for itself is never placed; after the
// table grows, a placed group keeps its home. A command on a group whose
// home is a data group is refused (GroupElsewhereError) and changes
// nothing; a data group refuses to place. The homes survive a snapshot.
func TestGroupPlace(t *testing.T) {
	dir := t.TempDir()
	f, fatals := groupFSM(t, dir, 0)
	a := &applier{t: t, f: f}
	place := func(name string) any {
		t.Helper()
		return a.apply(mustJSON(t, CmdGroupPlace, qnow+int64(a.index), GroupPlace{Group: name}))
	}

	a.apply(createCmd(t, "orders", 2, qnow))
	// Before data groups: home 0, recorded.
	if res := place("early"); res != uint64(0) {
		t.Fatalf("place without data groups: %v", res)
	}
	// A group the meta group holds from before the level.
	if _, ok := a.apply(mustJSON(t, CmdGroupJoin, qnow, GroupJoin{Group: "old", Member: "m", Topics: []string{"orders"}, SessionTimeoutMs: 60000})).(group.Assignment); !ok {
		t.Fatal("join refused")
	}
	if res := a.apply(twoGroups(t, 0)); res != nil {
		t.Fatalf("table: %v", res)
	}
	tab := f.DataGroups()
	in1, in2 := nameHomed(t, "billing", tab, 1), nameHomed(t, "billing", tab, 2)
	for _, c := range []struct {
		group string
		want  any
	}{
		{"old", uint64(0)},
		{"early", uint64(0)},
		{in1, uint64(1)},
		{in2, uint64(2)},
		{in1, uint64(1)},
		{group.RedrivePrefix + "job-1", uint64(0)},
	} {
		if res := place(c.group); res != c.want {
			t.Fatalf("place %q: %v, want %v", c.group, res, c.want)
		}
	}
	if _, ok := f.GroupHome(group.RedrivePrefix + "job-1"); ok {
		t.Fatal("a redrive job's group was recorded")
	}
	if err, _ := place("bad\nname").(error); !errors.Is(err, group.ErrInvalidGroupRequest) {
		t.Fatalf("place a bad name: %v", err)
	}

	// Commands on a group placed in a data group are refused here, and
	// change nothing.
	before := stateDigest(t, f, dir)
	for _, cmd := range [][]byte{
		mustJSON(t, CmdGroupJoin, qnow+100, GroupJoin{Group: in1, Member: "m", Topics: []string{"orders"}, SessionTimeoutMs: 60000}),
		EncodeGroupSetOffsets(qnow+100, GroupSetOffsets{Group: in2, Fence: group.NoFence, Offsets: []group.OffsetCommit{{TopicPartition: group.TopicPartition{Topic: "orders"}, Offset: 0}}}),
		mustJSON(t, CmdGroupDelete, qnow+100, GroupDelete{Group: in1}),
	} {
		var ge *GroupElsewhereError
		if err, _ := a.apply(cmd).(error); !errors.Is(err, backend.ErrGroupElsewhere) || !errors.As(err, &ge) || ge.Home == 0 {
			t.Fatalf("%s on a group placed elsewhere: %v", CommandType(cmd[0]), err)
		}
	}
	// The dry run refuses it too.
	if err, _ := f.DryRunGroup(CmdGroupLeave, in1, qnow+100, GroupLeave{Group: in1, Member: "m"}).(error); !errors.Is(err, backend.ErrGroupElsewhere) {
		t.Fatalf("dry run on a group placed elsewhere: %v", err)
	}
	if after := stateDigest(t, f, dir); after != before {
		t.Fatalf("refused commands changed the state:\n%s\n%s", before, after)
	}

	// The table grows: placed groups keep their homes.
	n1 := []string{"n1"}
	grown := DataGroupsSet{Base: f.DataGroups().Epoch, Nodes: n1}
	for id := uint64(1); id <= 7; id++ {
		grown.Groups = append(grown.Groups, DataGroup{ID: id, Replicas: n1, Bootstrap: n1})
	}
	if res := a.apply(mustEncode(t)(EncodeDataGroups(qnow, grown))); res != nil {
		t.Fatalf("grow: %v", res)
	}
	if res := place(in2); res != uint64(2) {
		t.Fatalf("after growth %s is at %v, want 2", in2, res)
	}
	if late := nameHomed(t, "late", f.DataGroups(), 7); place(late) != uint64(7) {
		t.Fatalf("a group placed after growth is not at its hash")
	}

	// A data group places nothing.
	g1, _ := groupFSM(t, t.TempDir(), 1)
	if err, _ := (&applier{t: t, f: g1}).apply(mustJSON(t, CmdGroupPlace, qnow, GroupPlace{Group: "x"})).(error); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Fatalf("group-place in a data group: %v", err)
	}

	// The homes survive a snapshot.
	r, _ := groupFSM(t, t.TempDir(), 0)
	if err := r.Restore(snapshotBytes(t, f)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"old", "early", in1, in2} {
		want, _ := f.GroupHome(name)
		if got, ok := r.GroupHome(name); !ok || got != want {
			t.Fatalf("restored home of %s: %d %v, want %d", name, got, ok, want)
		}
	}
	if level, name, err := EntryLevel(mustJSON(t, CmdGroupPlace, qnow, GroupPlace{Group: "g"})); err != nil || level != HashedGroupsLevel || name != "group-place" {
		t.Fatalf("entry level %d %q, %v", level, name, err)
	}
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}
}

// snapshotBytes is a snapshot of f as Persist writes it.
func snapshotBytes(t *testing.T, f *FSM) *bytes.Buffer {
	t.Helper()
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	return persist(t, s)
}

// hosted wraps a group command for a data group.
func hosted(t *testing.T, now int64, metaIndex uint64, topics []GroupTopic, ct CommandType, body any) []byte {
	t.Helper()
	var inner []byte
	if c, ok := body.(GroupSetOffsets); ok {
		inner = EncodeGroupSetOffsets(now, c)
	} else {
		inner = mustEncode(t)(EncodeJSON(ct, now, body))
	}
	_, data, err := NewGroupHosted(now, metaIndex, topics, inner)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestGroupHosted is a script of consumer group commands in a data group:
// the topics come from the views the commands carry (a later view
// replaces an earlier one, an older one is ignored), a partition the data
// group hosts is bounded by its applied end and any other by the end the
// command carries; a view that grows a topic rebalances its subscribed
// groups, and one that says the topic is gone drops its offsets at the
// next rebalance. Malformed views refuse the command and change nothing;
// the meta group refuses the wrapper. The state survives a snapshot.
func TestGroupHosted(t *testing.T) {
	dir := t.TempDir()
	f, fatals := groupFSM(t, dir, 1)
	a := &applier{t: t, f: f}
	// "orders" has its partition 0 here and 1 in data group 2; "legacy"
	// is a topic of the meta group, of which this data group holds
	// nothing.
	a.apply(mustJSON(t, CmdPartitionAdopt, qnow, PartitionAdopt{Topic: "orders", CreateIndex: 7, Partitions: 2, Placement: []uint64{1, 2}, Epoch: 1}))
	a.apply(encodeAppend(qnow, Append{Topic: "orders", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, "a", "b", "c")}}}))
	orders := GroupTopic{Name: "orders", Partitions: 2, Incarnation: 7}
	legacy := GroupTopic{Name: "legacy", Partitions: 1, Incarnation: 3}
	tp := func(topic string, p int32) group.TopicPartition {
		return group.TopicPartition{Topic: topic, Partition: p}
	}
	join := func(now int64, meta uint64, views []GroupTopic, member string, topics ...string) any {
		return a.apply(hosted(t, now, meta, views, CmdGroupJoin, GroupJoin{Group: "billing", Member: member, Topics: topics, SessionTimeoutMs: 60000}))
	}

	// A join for a topic the command carries no view of: unknown.
	if err, _ := join(qnow+1, 10, nil, "m1", "orders").(error); !errors.Is(err, group.ErrUnknownGroupTopic) {
		t.Fatalf("join without views: %v", err)
	}
	as, ok := join(qnow+2, 10, []GroupTopic{orders, legacy}, "m1", "orders", "legacy").(group.Assignment)
	if !ok || len(as.Partitions) != 3 {
		t.Fatalf("join: %+v", as)
	}
	gen := as.Generation
	commit := func(now int64, offsets []group.OffsetCommit, ends []PartitionEnd) any {
		return a.apply(hosted(t, now, 10, nil, CmdGroupCommit, GroupCommit{Group: "billing", Member: "m1", Generation: gen, Offsets: offsets, Ends: ends}))
	}
	// orders-0 is hosted here (end 3), orders-1 and legacy-0 are not.
	for _, c := range []struct {
		name    string
		offsets []group.OffsetCommit
		ends    []PartitionEnd
		want    error
	}{
		{"hosted, at its end", []group.OffsetCommit{{TopicPartition: tp("orders", 0), Offset: 3}}, nil, nil},
		{"hosted, past its end", []group.OffsetCommit{{TopicPartition: tp("orders", 0), Offset: 4}}, nil, group.ErrOffsetAboveEnd},
		{"elsewhere, without its end", []group.OffsetCommit{{TopicPartition: tp("orders", 1), Offset: 1}}, nil, backend.ErrPartitionElsewhere},
		{"elsewhere, with its end", []group.OffsetCommit{{TopicPartition: tp("orders", 1), Offset: 5}}, []PartitionEnd{{Topic: "orders", Partition: 1, End: 5}}, nil},
		{"the meta group's, past the carried end", []group.OffsetCommit{{TopicPartition: tp("legacy", 0), Offset: 9}}, []PartitionEnd{{Topic: "legacy", End: 8}}, group.ErrOffsetAboveEnd},
		{"the meta group's, without an end", []group.OffsetCommit{{TopicPartition: tp("legacy", 0), Offset: 1}}, nil, group.ErrOffsetAboveEnd},
		{"the meta group's, with its end", []group.OffsetCommit{{TopicPartition: tp("legacy", 0), Offset: 8}}, []PartitionEnd{{Topic: "legacy", End: 8}}, nil},
	} {
		res := commit(qnow+3, c.offsets, c.ends)
		if err, _ := res.(error); c.want == nil && res != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Fatalf("%s: %v, want %v", c.name, res, c.want)
		}
	}
	g, err := f.ConsumerGroup("billing")
	if err != nil {
		t.Fatal(err)
	}
	if g.Topics["orders"].Partitions[0].Committed != 3 || g.Topics["orders"].Partitions[1].Committed != 5 || g.Topics["legacy"].Partitions[0].Committed != 8 {
		t.Fatalf("committed %+v %+v", g.Topics["orders"], g.Topics["legacy"])
	}

	// Malformed views refuse the command whole.
	before := stateDigest(t, f, dir)
	for _, views := range [][]GroupTopic{
		{{Name: ""}},
		{orders, orders},
		{{Name: "x", Partitions: 3}},
		{{Name: "x", Partitions: -1, Incarnation: 2}},
	} {
		if err, _ := join(qnow+4, 20, views, "m2", "orders").(error); !errors.Is(err, group.ErrInvalidGroupRequest) {
			t.Fatalf("views %+v: %v", views, err)
		}
	}
	if after := stateDigest(t, f, dir); after != before {
		t.Fatalf("refused commands changed the state:\n%s\n%s", before, after)
	}

	// An older view (a proposer whose meta replica lags) is ignored: the
	// topic does not shrink back.
	a.apply(hosted(t, qnow+5, 4, []GroupTopic{{Name: "orders", Partitions: 1, Incarnation: 7}}, CmdGroupHeartbeat, GroupHeartbeat{Group: "billing", Member: "m1"}))
	if v, _ := f.GroupTopicView("orders"); v != orders {
		t.Fatalf("an older view replaced a newer one: %+v", v)
	}
	// A newer view that grows orders rebalances billing at once.
	grown := GroupTopic{Name: "orders", Partitions: 4, Incarnation: 7}
	as, ok = a.apply(hosted(t, qnow+6, 30, []GroupTopic{grown}, CmdGroupHeartbeat, GroupHeartbeat{Group: "billing", Member: "m1"})).(group.Assignment)
	if !ok || as.Generation <= gen || len(as.Partitions) != 5 {
		t.Fatalf("heartbeat with orders grown to 4: %+v", as)
	}
	gen = as.Generation
	// A view saying legacy is gone: its offsets go at the next
	// rebalance (here, a second member's join).
	if _, ok := a.apply(hosted(t, qnow+7, 40, []GroupTopic{{Name: "legacy"}}, CmdGroupJoin, GroupJoin{Group: "billing", Member: "m2", Topics: []string{"orders"}, SessionTimeoutMs: 60000})).(group.Assignment); !ok {
		t.Fatal("second join refused")
	}
	if g, _ := f.ConsumerGroup("billing"); g.Topics["legacy"] != nil {
		t.Fatalf("offsets of a deleted topic kept: %+v", g.Topics["legacy"])
	}

	// A Kafka group's commit (set-offsets) and a delete, wrapped.
	if res := a.apply(hosted(t, qnow+8, 40, []GroupTopic{grown}, CmdGroupSetOffsets, GroupSetOffsets{Group: "kgroup", Fence: group.NoFence,
		Offsets: []group.OffsetCommit{{TopicPartition: tp("orders", 0), Offset: 2}, {TopicPartition: tp("orders", 3), Offset: 1}},
		Ends:    []PartitionEnd{{Topic: "orders", Partition: 3, End: 1}}})); res != nil {
		t.Fatalf("set offsets: %v", res)
	}
	if fence, _, ok := f.GroupFence("kgroup", qnow+8); !ok || fence != 0 {
		t.Fatalf("kgroup fence %d %v", fence, ok)
	}
	if res := a.apply(hosted(t, qnow+9, 40, nil, CmdGroupDelete, GroupDelete{Group: "kgroup"})); res != nil {
		t.Fatalf("delete: %v", res)
	}

	// The catalog and the groups survive a snapshot.
	want := stateDigest(t, f, dir)
	if !strings.Contains(want, `"topics":[{"meta_index":40,"name":"legacy"},{"incarnation":7,"meta_index":40,"name":"orders","partitions":4}]`) {
		t.Fatalf("snapshot without the catalog: %s", want)
	}
	rdir := t.TempDir()
	r := New(Config{Dir: filepath.Join(rdir, "topics"), Log: log.Options{Sync: log.SyncNone}, Logger: testLogger(), Group: 1, Fetcher: dirFetcher{src: f}})
	t.Cleanup(func() { r.Close() })
	if err := r.Restore(snapshotBytes(t, f)); err != nil {
		t.Fatal(err)
	}
	if got := stateDigest(t, r, rdir); got != want {
		t.Fatalf("restored state differs:\n%s\n%s", got, want)
	}
	// The restored catalog decides as the original: an older view is
	// still ignored.
	ra := &applier{t: t, f: r, index: a.index}
	ra.apply(hosted(t, qnow+10, 29, []GroupTopic{orders}, CmdGroupHeartbeat, GroupHeartbeat{Group: "billing", Member: "m1"}))
	if v, _ := r.GroupTopicView("orders"); v != grown {
		t.Fatalf("restored catalog took an older view: %+v", v)
	}

	// The meta group refuses the wrapper.
	m, _ := groupFSM(t, t.TempDir(), 0)
	if err, _ := (&applier{t: t, f: m}).apply(hosted(t, qnow, 1, nil, CmdGroupDelete, GroupDelete{Group: "g"})).(error); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Fatalf("group-hosted in the meta group: %v", err)
	}
	if level, name, err := EntryLevel(hosted(t, qnow, 1, nil, CmdGroupDelete, GroupDelete{Group: "g"})); err != nil || level != HashedGroupsLevel || name != "group-hosted" {
		t.Fatalf("entry level %d %q, %v", level, name, err)
	}
	if f.AppliedLevel() != HashedGroupsLevel || len(*fatals) != 0 {
		t.Fatalf("applied level %d, fatals %v", f.AppliedLevel(), *fatals)
	}
}

// TestGroupHostedDryRun: a proposer's dry run of a wrapped command
// decides as Apply would, on a copy: it learns the views in the copy
// only.
func TestGroupHostedDryRun(t *testing.T) {
	f, _ := groupFSM(t, t.TempDir(), 1)
	a := &applier{t: t, f: f}
	orders := GroupTopic{Name: "orders", Partitions: 2, Incarnation: 7}
	wrap := func(views []GroupTopic, inner []byte) GroupHosted {
		c, _, err := NewGroupHosted(qnow, 5, views, inner)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	join := mustJSON(t, CmdGroupJoin, qnow, GroupJoin{Group: "billing", Member: "m1", Topics: []string{"orders"}, SessionTimeoutMs: 60000})
	if err, _ := f.DryRunGroup(CmdGroupHosted, "billing", qnow, wrap(nil, join)).(error); !errors.Is(err, group.ErrUnknownGroupTopic) {
		t.Fatalf("dry run without the view: %v", err)
	}
	if _, ok := f.DryRunGroup(CmdGroupHosted, "billing", qnow, wrap([]GroupTopic{orders}, join)).(group.Assignment); !ok {
		t.Fatal("dry run with the view refused")
	}
	if _, ok := f.GroupTopicView("orders"); ok {
		t.Fatal("a dry run changed the catalog")
	}
	if _, err := f.ConsumerGroup("billing"); !errors.Is(err, group.ErrConsumerGroupNotFound) {
		t.Fatalf("a dry run made the group: %v", err)
	}
	if _, ok := a.apply(hosted(t, qnow, 5, []GroupTopic{orders}, CmdGroupJoin, GroupJoin{Group: "billing", Member: "m1", Topics: []string{"orders"}, SessionTimeoutMs: 60000})).(group.Assignment); !ok {
		t.Fatal("join refused")
	}
}

// TestGroupHostedUndecodable: a wrapper that does not decode, or wraps a
// command that does not or a command of another kind, stops the state
// machine and changes nothing; NewGroupHosted refuses to wrap one.
func TestGroupHostedUndecodable(t *testing.T) {
	inner := mustJSON(t, CmdGroupDelete, qnow, GroupDelete{Group: "g"})
	raw := func(payload string) []byte { return append(encodeHeader(nil, CmdGroupHosted, qnow), payload...) }
	b64 := func(cmd []byte) string {
		j, err := json.Marshal(cmd)
		if err != nil {
			t.Fatal(err)
		}
		return string(j)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"not JSON", raw(`{"meta_index":`)},
		{"no command", raw(`{"meta_index":1}`)},
		{"a command that does not decode", raw(`{"meta_index":1,"command":` + b64(append(encodeHeader(nil, CmdGroupJoin, qnow), `{"group":`...)) + `}`)},
		{"a command of another kind", raw(`{"meta_index":1,"command":` + b64(createCmd(t, "t", 1, qnow)) + `}`)},
		{"a wrapper in a wrapper", raw(`{"meta_index":1,"command":` + b64(hosted(t, qnow, 1, nil, CmdGroupDelete, GroupDelete{Group: "g"})) + `}`)},
		{"a damaged command", raw(`{"meta_index":1,"command":` + b64(func() []byte { s := sealEntry(append([]byte{}, inner...)); s[len(s)-1] ^= 1; return s }()) + `}`)},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			f, fatals := groupFSM(t, dir, 1)
			a := &applier{t: t, f: f}
			a.apply(hosted(t, qnow, 1, []GroupTopic{{Name: "orders", Partitions: 1, Incarnation: 7}}, CmdGroupSetOffsets,
				GroupSetOffsets{Group: "g", Fence: group.NoFence, Offsets: []group.OffsetCommit{{TopicPartition: group.TopicPartition{Topic: "orders"}, Offset: 0}}}))
			before := stateDigest(t, f, dir)
			if err, _ := a.apply(c.data).(error); !errors.Is(err, backend.ErrStopped) || len(*fatals) != 1 {
				t.Fatalf("%v, fatals %v", err, *fatals)
			}
			if !errors.Is((*fatals)[0], backend.ErrBadCommand) && !errors.Is((*fatals)[0], backend.ErrEntryDamaged) {
				t.Fatalf("stopped by %v", (*fatals)[0])
			}
			f.failed.Store(nil)
			if after := stateDigest(t, f, dir); after != before {
				t.Fatalf("state changed:\n%s\n%s", before, after)
			}
		})
	}
	if _, _, err := NewGroupHosted(qnow, 1, nil, createCmd(t, "t", 1, qnow)); !errors.Is(err, backend.ErrBadCommand) {
		t.Fatalf("NewGroupHosted of a create-topic: %v", err)
	}
}
