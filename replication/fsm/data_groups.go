package fsm

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/logd-dev/logd/backend"
)

// DataGroup is one data group as the meta group places it: its id and the
// nodes that hold its replicas, the preferred leader first (package
// replication/placement decides them; docs/architecture.md, "Data
// groups"). Group 0 is the meta group itself, which is not in the table:
// every member of the cluster holds it.
type DataGroup struct {
	ID       uint64   `json:"id"`
	Replicas []string `json:"replicas"`
	// Bootstrap is the group's replicas when it was made, which start it
	// together with this configuration; a replica added later starts
	// empty and is added by the group's leader.
	Bootstrap []string `json:"bootstrap"`
	// Move, when set, is the change of the group's replicas in progress:
	// the group's voters are not the table's replicas yet (payload
	// version dataGroupsMoveVersion, at MovesLevel).
	Move *ReplicaMove `json:"move,omitempty"`
}

// ReplicaMove is a change of a data group's replicas the meta leader
// made and the group has not finished (docs/architecture.md, "Data
// groups"): the table set it with the replicas it changed, and the meta
// leader clears it once the group's voters are the table's replicas. It
// lives in the meta group, so a new meta leader knows what is moving, and
// operators see it (logctl cluster moves).
type ReplicaMove struct {
	// Added are the replicas the group is to gain, Removed those it is to
	// lose (several when changes followed each other before the group
	// finished the first).
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
	// Reason is why the replicas changed ("balance", "node n4 joined",
	// "node n2 not heard from", "node n3 drained", "node n5 removed").
	Reason string `json:"reason"`
	// Since is when the change began (the proposer's clock, Unix
	// nanoseconds).
	Since int64 `json:"since"`
}

// Clone returns a copy of m (nil for nil).
func (m *ReplicaMove) Clone() *ReplicaMove {
	if m == nil {
		return nil
	}
	return &ReplicaMove{Added: slices.Clone(m.Added), Removed: slices.Clone(m.Removed), Reason: m.Reason, Since: m.Since}
}

// DataGroupsSet replaces the table of data groups (CmdDataGroups, at
// DataGroupLevel). Base is the epoch of the table the proposer computed
// Groups from: a set whose Base is not the current epoch is refused, so
// two proposers' plans never interleave, and the epoch after an applied
// set is its Raft index. A set keeps every group of the table (a group is
// never removed here) and lists them by ascending id from 1, each on
// distinct nodes.
type DataGroupsSet struct {
	Base   uint64      `json:"base"`
	Groups []DataGroup `json:"groups"`
	// Nodes are the nodes placement has placed groups over so far, in
	// the order they were added: a member not listed is a joiner whose
	// share is still to be placed.
	Nodes []string `json:"nodes"`
	// Draining are placed nodes an operator drains: they keep serving
	// but are to hold no replica (payload version dataGroupsDrainVersion,
	// at PlacedGroupsLevel).
	Draining []string `json:"draining,omitempty"`
}

// dataGroupsDrainVersion is the data-groups payload version of a set
// naming nodes to drain, at PlacedGroupsLevel: a build below it would
// drop the field and its replicas would hold another table.
const dataGroupsDrainVersion = 2

// dataGroupsMoveVersion is the data-groups payload version of a set with
// a group's move in progress (DataGroup.Move), at MovesLevel.
const dataGroupsMoveVersion = 3

// dataGroupTable is the meta group's table of data groups.
type dataGroupTable struct {
	mu sync.RWMutex
	// groups by ascending id and epoch, the Raft index of the set that
	// made them (0: none yet); guarded by mu.
	groups   []DataGroup
	nodes    []string
	draining []string
	epoch    uint64
}

// DataGroupTable is the table of data groups as the meta group holds it.
type DataGroupTable struct {
	// Groups by ascending id.
	Groups []DataGroup
	// Nodes placed over so far (DataGroupsSet.Nodes).
	Nodes []string
	// Draining are the nodes being drained (DataGroupsSet.Draining).
	Draining []string
	// Epoch is the Raft index of the set that made the table; 0 for
	// none yet.
	Epoch uint64
}

// DataGroups returns a copy of the table of data groups.
func (f *FSM) DataGroups() DataGroupTable {
	t := &f.dataGroups
	t.mu.RLock()
	defer t.mu.RUnlock()
	return DataGroupTable{Groups: cloneDataGroups(t.groups), Nodes: slices.Clone(t.nodes), Draining: slices.Clone(t.draining), Epoch: t.epoch}
}

// HasDataGroups reports whether the table of data groups has a group.
func (f *FSM) HasDataGroups() bool {
	t := &f.dataGroups
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.groups) > 0
}

func cloneDataGroups(gs []DataGroup) []DataGroup {
	if gs == nil {
		return nil
	}
	out := make([]DataGroup, len(gs))
	for i, g := range gs {
		out[i] = DataGroup{ID: g.ID, Replicas: slices.Clone(g.Replicas), Bootstrap: slices.Clone(g.Bootstrap), Move: g.Move.Clone()}
	}
	return out
}

// checkDataGroups reports whether next (over nodes) is a table that may
// follow prev: ids ascending from 1, replicas distinct and named, every
// group of prev kept with its bootstrap replicas.
func checkDataGroups(prev, next []DataGroup, nodes []string) error {
	if err := distinctNames("placed nodes", nodes); err != nil {
		return err
	}
	var last uint64
	ids := make(map[uint64]bool, len(next))
	for _, g := range next {
		if g.ID <= last {
			return fmt.Errorf("%w: data group ids must ascend from 1 (%d after %d)", backend.ErrInvalidArgument, g.ID, last)
		}
		last = g.ID
		ids[g.ID] = true
		if len(g.Replicas) == 0 {
			return fmt.Errorf("%w: data group %d has no replicas", backend.ErrInvalidArgument, g.ID)
		}
		if err := distinctNames(fmt.Sprintf("data group %d's replicas", g.ID), g.Replicas); err != nil {
			return err
		}
		if err := distinctNames(fmt.Sprintf("data group %d's bootstrap replicas", g.ID), g.Bootstrap); err != nil {
			return err
		}
		if len(g.Bootstrap) == 0 {
			return fmt.Errorf("%w: data group %d has no bootstrap replicas", backend.ErrInvalidArgument, g.ID)
		}
		if err := checkMove(g); err != nil {
			return err
		}
	}
	for _, g := range prev {
		i := slices.IndexFunc(next, func(n DataGroup) bool { return n.ID == g.ID })
		if i < 0 {
			return fmt.Errorf("%w: data group %d would be dropped", backend.ErrInvalidArgument, g.ID)
		}
		if !slices.Equal(next[i].Bootstrap, g.Bootstrap) {
			return fmt.Errorf("%w: data group %d's bootstrap replicas would change", backend.ErrInvalidArgument, g.ID)
		}
	}
	return nil
}

// checkMove reports whether g's move, if any, names replicas it added
// that g lists, and replicas it removed that g does not.
func checkMove(g DataGroup) error {
	m := g.Move
	if m == nil {
		return nil
	}
	if len(m.Added) == 0 && len(m.Removed) == 0 || m.Reason == "" || m.Since <= 0 {
		return fmt.Errorf("%w: data group %d's move names no replica, reason or start", backend.ErrInvalidArgument, g.ID)
	}
	for _, id := range m.Added {
		if !slices.Contains(g.Replicas, id) {
			return fmt.Errorf("%w: data group %d's move adds %q, which it does not list", backend.ErrInvalidArgument, g.ID, id)
		}
	}
	for _, id := range m.Removed {
		if slices.Contains(g.Replicas, id) {
			return fmt.Errorf("%w: data group %d's move removes %q, which it lists", backend.ErrInvalidArgument, g.ID, id)
		}
	}
	return nil
}

// distinctNames reports whether names are distinct and none is empty.
func distinctNames(what string, names []string) error {
	seen := make(map[string]bool, len(names))
	for _, r := range names {
		if r == "" || seen[r] {
			return fmt.Errorf("%w: %s list %q empty or twice", backend.ErrInvalidArgument, what, r)
		}
		seen[r] = true
	}
	return nil
}

// applyDataGroups replaces the table when c's base is the current epoch.
func (f *FSM) applyDataGroups(index uint64, _ int64, c DataGroupsSet) any {
	t := &f.dataGroups
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.Base != t.epoch {
		return fmt.Errorf("%w: the data groups changed at index %d since the plan's %d", backend.ErrMembershipChange, t.epoch, c.Base)
	}
	if err := checkDataGroups(t.groups, c.Groups, c.Nodes); err != nil {
		return err
	}
	if err := checkDraining(c.Draining, c.Nodes); err != nil {
		return err
	}
	t.groups, t.nodes, t.draining, t.epoch = cloneDataGroups(c.Groups), slices.Clone(c.Nodes), slices.Clone(c.Draining), index
	return nil
}

// checkDraining reports whether draining names distinct placed nodes.
func checkDraining(draining, nodes []string) error {
	if err := distinctNames("draining nodes", draining); err != nil {
		return err
	}
	for _, d := range draining {
		if !slices.Contains(nodes, d) {
			return fmt.Errorf("%w: draining node %q is not placed", backend.ErrInvalidArgument, d)
		}
	}
	return nil
}

// EncodeDataGroups is the Raft entry of a DataGroupsSet: at
// dataGroupsDrainVersion when it names nodes to drain.
func EncodeDataGroups(now int64, c DataGroupsSet) ([]byte, error) {
	data, err := encodeJSONCommand(CmdDataGroups, now, c)
	if err != nil {
		return nil, err
	}
	if len(c.Draining) > 0 {
		data[1] = dataGroupsDrainVersion
	}
	if slices.ContainsFunc(c.Groups, func(g DataGroup) bool { return g.Move != nil }) {
		data[1] = dataGroupsMoveVersion
	}
	return data, nil
}

func decodeDataGroups(p []byte, version byte, _ *keyScratch) (DataGroupsSet, error) {
	var c DataGroupsSet
	if err := json.Unmarshal(p, &c); err != nil {
		return c, fmt.Errorf("%w: data-groups: %v", backend.ErrBadCommand, err)
	}
	if version < dataGroupsDrainVersion && len(c.Draining) > 0 {
		return c, fmt.Errorf("%w: data-groups version %d naming nodes to drain", backend.ErrBadCommand, version)
	}
	if version < dataGroupsMoveVersion && slices.ContainsFunc(c.Groups, func(g DataGroup) bool { return g.Move != nil }) {
		return c, fmt.Errorf("%w: data-groups version %d with a move in progress", backend.ErrBadCommand, version)
	}
	return c, nil
}

// dataGroupsManifest is the table in a snapshot.
type dataGroupsManifest struct {
	Epoch  uint64      `json:"epoch"`
	Groups []DataGroup `json:"groups"`
	Nodes  []string    `json:"nodes"`
	// Draining, when any (a snapshot with it is read by builds at
	// PlacedGroupsLevel).
	Draining []string `json:"draining,omitempty"`
}

// dataGroupsSnapshot returns the table for a manifest; nil without one.
func (f *FSM) dataGroupsSnapshot() *dataGroupsManifest {
	t := f.DataGroups()
	if t.Epoch == 0 {
		return nil
	}
	return &dataGroupsManifest{Epoch: t.Epoch, Groups: t.Groups, Nodes: t.Nodes, Draining: t.Draining}
}

// checkDataGroupsManifest checks a manifest's table (nil: none).
func checkDataGroupsManifest(m *dataGroupsManifest) error {
	if m == nil {
		return nil
	}
	if err := checkDataGroups(nil, m.Groups, m.Nodes); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := checkDraining(m.Draining, m.Nodes); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return nil
}

// restoreDataGroups installs a checked manifest's table (nil: none).
func (f *FSM) restoreDataGroups(m *dataGroupsManifest) {
	t := &f.dataGroups
	t.mu.Lock()
	defer t.mu.Unlock()
	if m == nil {
		t.groups, t.nodes, t.draining, t.epoch = nil, nil, nil, 0
		return
	}
	t.groups, t.nodes, t.draining, t.epoch = cloneDataGroups(m.Groups), slices.Clone(m.Nodes), slices.Clone(m.Draining), m.Epoch
}
