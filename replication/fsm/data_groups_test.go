package fsm

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
)

// TestDataGroupsTable: the table of data groups changes only by a set
// based on its current epoch, keeps every group, refuses malformed
// tables without changing, and survives a snapshot.
func TestDataGroupsTable(t *testing.T) {
	dir := t.TempDir()
	f, _ := testFSM(t, dir)
	now := int64(1_700_000_000_000_000_000)
	index := uint64(0)
	set := func(c DataGroupsSet) any {
		t.Helper()
		d, err := EncodeDataGroups(now, c)
		if err != nil {
			t.Fatal(err)
		}
		index++
		return f.apply(Entry{Index: index, Command: true, Data: d})
	}
	n1 := []string{"n1"}
	one := []DataGroup{{ID: 1, Replicas: n1, Bootstrap: n1}, {ID: 2, Replicas: n1, Bootstrap: n1}}
	if r := set(DataGroupsSet{Base: 0, Groups: one, Nodes: n1}); r != nil {
		t.Fatalf("first set: %v", r)
	}
	tab := f.DataGroups()
	if tab.Epoch != index || !reflect.DeepEqual(tab.Groups, one) || !reflect.DeepEqual(tab.Nodes, n1) {
		t.Fatalf("table %+v, want %v at %d", tab, one, index)
	}
	first := tab.Epoch
	two := []DataGroup{{ID: 1, Replicas: []string{"n1", "n2"}, Bootstrap: n1}, {ID: 2, Replicas: []string{"n2", "n1"}, Bootstrap: n1},
		{ID: 3, Replicas: []string{"n2", "n1"}, Bootstrap: []string{"n2", "n1"}}}
	nodes := []string{"n1", "n2"}
	for _, c := range []struct {
		name string
		set  DataGroupsSet
		want error
	}{
		{"stale base", DataGroupsSet{Base: 0, Groups: two, Nodes: nodes}, backend.ErrMembershipChange},
		{"a group dropped", DataGroupsSet{Base: first, Groups: two[1:], Nodes: nodes}, backend.ErrInvalidArgument},
		{"ids out of order", DataGroupsSet{Base: first, Groups: []DataGroup{two[1], two[0]}, Nodes: nodes}, backend.ErrInvalidArgument},
		{"group 0 is the meta group", DataGroupsSet{Base: first, Groups: append([]DataGroup{{ID: 0, Replicas: n1, Bootstrap: n1}}, two...), Nodes: nodes}, backend.ErrInvalidArgument},
		{"no replicas", DataGroupsSet{Base: first, Groups: []DataGroup{two[0], {ID: 2, Bootstrap: n1}}, Nodes: nodes}, backend.ErrInvalidArgument},
		{"no bootstrap replicas", DataGroupsSet{Base: first, Groups: []DataGroup{two[0], {ID: 2, Replicas: n1}}, Nodes: nodes}, backend.ErrInvalidArgument},
		{"bootstrap replicas changed", DataGroupsSet{Base: first, Groups: []DataGroup{two[0], {ID: 2, Replicas: n1, Bootstrap: nodes}}, Nodes: nodes}, backend.ErrInvalidArgument},
		{"a replica twice", DataGroupsSet{Base: first, Groups: []DataGroup{two[0], {ID: 2, Replicas: []string{"n1", "n1"}, Bootstrap: n1}}, Nodes: nodes}, backend.ErrInvalidArgument},
		{"an empty replica", DataGroupsSet{Base: first, Groups: []DataGroup{two[0], {ID: 2, Replicas: []string{""}, Bootstrap: n1}}, Nodes: nodes}, backend.ErrInvalidArgument},
		{"draining a node not placed", DataGroupsSet{Base: first, Groups: two, Nodes: nodes, Draining: []string{"n3"}}, backend.ErrInvalidArgument},
		{"draining a node twice", DataGroupsSet{Base: first, Groups: two, Nodes: nodes, Draining: []string{"n2", "n2"}}, backend.ErrInvalidArgument},
		{"a node twice", DataGroupsSet{Base: first, Groups: two, Nodes: []string{"n1", "n1"}}, backend.ErrInvalidArgument},
	} {
		err, _ := set(c.set).(error)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if tab := f.DataGroups(); tab.Epoch != first || !reflect.DeepEqual(tab.Groups, one) {
			t.Errorf("%s changed the table: %+v", c.name, tab)
		}
	}
	if r := set(DataGroupsSet{Base: first, Groups: two, Nodes: nodes}); r != nil {
		t.Fatalf("second set: %v", r)
	}
	// A copy is handed out: changing it changes nothing.
	tab = f.DataGroups()
	tab.Groups[0].Replicas[0] = "x"
	if again := f.DataGroups(); again.Groups[0].Replicas[0] != "n1" {
		t.Fatal("DataGroups handed out the table itself")
	}
	tab = f.DataGroups()

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := persist(t, snap)
	snap.Release()
	f.Close()
	f2, _ := testFSM(t, t.TempDir())
	if err := f2.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if got := f2.DataGroups(); !reflect.DeepEqual(got, tab) {
		t.Errorf("restored %+v, want %+v", got, tab)
	}
}

// TestDataGroupsDraining: a set naming nodes to drain is payload version 2
// at PlacedGroupsLevel, kept in the table and in snapshots; a version-1
// entry naming them is malformed.
func TestDataGroupsDraining(t *testing.T) {
	dir := t.TempDir()
	f, _ := testFSM(t, dir)
	n12 := []string{"n1", "n2"}
	c := DataGroupsSet{Groups: []DataGroup{{ID: 1, Replicas: []string{"n1"}, Bootstrap: n12}}, Nodes: n12, Draining: []string{"n2"}}
	d := encodeTableAt(t, c, PlacedGroupsLevel, commandVersion)
	if r := f.apply(Entry{Index: 1, Command: true, Data: d}); r != nil {
		t.Fatal(r)
	}
	if tab := f.DataGroups(); !reflect.DeepEqual(tab.Draining, []string{"n2"}) {
		t.Fatalf("table %+v", tab)
	}
	if tab := restoredTable(t, f); !reflect.DeepEqual(tab.Draining, []string{"n2"}) || tab.Epoch != 1 {
		t.Fatalf("restored table %+v", tab)
	}
}

// encodeTableAt encodes c, which must need level, and checks that the
// same payload at the earlier version older is malformed.
func encodeTableAt(t *testing.T, c DataGroupsSet, level FeatureLevel, older byte) []byte {
	t.Helper()
	d, err := EncodeDataGroups(1, c)
	if err != nil {
		t.Fatal(err)
	}
	if lvl, _, err := EntryLevel(d); err != nil || lvl != level {
		t.Fatalf("the set needs level %d, want %d (%v)", lvl, level, err)
	}
	old := append([]byte{}, d...)
	old[1] = older
	if _, err := decodeCommandWith(sealEntry(old), &keyScratch{}); !errors.Is(err, backend.ErrBadCommand) {
		t.Fatalf("the set at version %d: %v, want ErrBadCommand", older, err)
	}
	return d
}

// restoredTable is f's table through a snapshot manifest restored into a
// fresh state machine.
func restoredTable(t *testing.T, f *FSM) DataGroupTable {
	t.Helper()
	m := f.dataGroupsSnapshot()
	g, _ := testFSM(t, t.TempDir())
	if err := checkDataGroupsManifest(m); err != nil {
		t.Fatal(err)
	}
	g.restoreDataGroups(m)
	return g.DataGroups()
}

// TestDataGroupsMoves: a set with a group's move in progress is payload
// version 3 at MovesLevel, kept in the table and in snapshots; an earlier
// version carrying one is malformed, and a move that adds a replica the
// group does not list, or removes one it lists, is refused.
func TestDataGroupsMoves(t *testing.T) {
	f, _ := testFSM(t, t.TempDir())
	n123 := []string{"n1", "n2", "n3"}
	mv := &ReplicaMove{Added: []string{"n3"}, Removed: []string{"n2"}, Reason: "balance", Since: 5}
	c := DataGroupsSet{Groups: []DataGroup{{ID: 1, Replicas: []string{"n1", "n3"}, Bootstrap: []string{"n1", "n2"}, Move: mv}}, Nodes: n123}
	d := encodeTableAt(t, c, MovesLevel, dataGroupsDrainVersion)
	for name, bad := range map[string]*ReplicaMove{
		"adds an unlisted replica": {Added: []string{"n2"}, Reason: "balance", Since: 5},
		"removes a listed replica": {Removed: []string{"n1"}, Reason: "balance", Since: 5},
		"names nothing":            {Reason: "balance", Since: 5},
		"no reason":                {Added: []string{"n3"}, Since: 5},
	} {
		b := c
		b.Groups = []DataGroup{{ID: 1, Replicas: []string{"n1", "n3"}, Bootstrap: []string{"n1", "n2"}, Move: bad}}
		bd, err := EncodeDataGroups(1, b)
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := f.apply(Entry{Index: 1, Command: true, Data: bd}).(error); !errors.Is(r, backend.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, r)
		}
	}
	if r := f.apply(Entry{Index: 2, Command: true, Data: d}); r != nil {
		t.Fatal(r)
	}
	if tab := f.DataGroups(); !reflect.DeepEqual(tab.Groups[0].Move, mv) {
		t.Fatalf("table %+v", tab)
	}
	if tab := restoredTable(t, f); !reflect.DeepEqual(tab.Groups[0].Move, mv) || tab.Epoch != 2 {
		t.Fatalf("restored table %+v", tab)
	}
}

// TestForNewClusterPlacesGroupsOnItsNode: a backup's meta group restored
// for a new cluster of one node places every data group on that node
// alone (its replicas and those it starts with), with no move or drain in
// progress, so that node runs every group alone (docs/operations.md,
// "Backup and restore").
func TestForNewClusterPlacesGroupsOnItsNode(t *testing.T) {
	f, _ := testFSM(t, t.TempDir())
	n123 := []string{"n1", "n2", "n3"}
	mv := &ReplicaMove{Added: []string{"n3"}, Removed: []string{"n2"}, Reason: "balance", Since: 5}
	c := DataGroupsSet{Groups: []DataGroup{{ID: 1, Replicas: []string{"n1", "n3"}, Bootstrap: []string{"n1", "n2"}, Move: mv},
		{ID: 2, Replicas: []string{"n3", "n1"}, Bootstrap: []string{"n2", "n3"}}}, Nodes: n123, Draining: []string{"n2"}}
	d, err := EncodeDataGroups(1, c)
	if err != nil {
		t.Fatal(err)
	}
	if r := f.apply(Entry{Index: 1, Command: true, Data: d}); r != nil {
		t.Fatal(r)
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := persist(t, snap)
	snap.Release()
	var fresh bytes.Buffer
	if err := ForNewCluster(&fresh, bytes.NewReader(sink.Bytes()), time.Unix(1_800_000_000, 0), "r1"); err != nil {
		t.Fatal(err)
	}
	g, _ := testFSM(t, t.TempDir())
	if err := g.Restore(io.NopCloser(bytes.NewReader(fresh.Bytes()))); err != nil {
		t.Fatal(err)
	}
	r1 := []string{"r1"}
	want := DataGroupTable{Groups: []DataGroup{{ID: 1, Replicas: r1, Bootstrap: r1}, {ID: 2, Replicas: r1, Bootstrap: r1}}, Nodes: r1, Epoch: 1}
	if got := g.DataGroups(); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored for a new cluster: %+v, want %+v", got, want)
	}
}
