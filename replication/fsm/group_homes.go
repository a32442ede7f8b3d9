package fsm

import (
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
)

// Consumer groups' homes (from HashedGroupsLevel; docs/architecture.md,
// "Consumer groups"). A consumer group's state (members, generations,
// committed offsets) lives in one Raft group, its home. The meta group
// records the home of each group the first time a node routes a command
// to it (group-place): a group the meta group already holds (it existed
// before the level) stays at home 0, the meta group, which is also data
// group 0; a new group goes to the data group its name hashes to among
// the table's groups at that moment. The record never changes, so a
// group's state never moves when the number of data groups grows, and
// every node that reads it routes the group to the same place. Groups
// logd keeps for its own work (group.Internal: a redrive job's position,
// committed in the same command as the job's state) are never placed:
// their home is 0.

// GroupPlace asks the meta group for a consumer group's home, recording
// it the first time (CmdGroupPlace). The result is the home (uint64).
type GroupPlace struct {
	Group string `json:"group"`
}

// GroupElsewhereError is a consumer group command refused because the
// group's home is another Raft group (errors.Is backend.ErrGroupElsewhere):
// the node that proposed it routed by a placement it had not applied yet,
// and routes it again.
type GroupElsewhereError struct {
	Group string
	// Home is the data group that holds the group's state.
	Home uint64
}

func (e *GroupElsewhereError) Error() string {
	return fmt.Sprintf("%v: group %q is in data group %d", backend.ErrGroupElsewhere, e.Group, e.Home)
}

// Unwrap makes errors.Is(err, backend.ErrGroupElsewhere) hold.
func (e *GroupElsewhereError) Unwrap() error { return backend.ErrGroupElsewhere }

// HashedHome is the data group a new consumer group named name goes to
// when the table is tab: one of the table's groups (never the meta
// group), by an FNV-1a hash of the name; 0 when the table has none.
func HashedHome(name string, tab DataGroupTable) uint64 {
	if len(tab.Groups) == 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	return tab.Groups[h.Sum64()%uint64(len(tab.Groups))].ID
}

// GroupHome returns the home the meta group recorded for a consumer
// group; ok is false when it recorded none (the group is then in the
// meta group if anywhere).
func (f *FSM) GroupHome(name string) (home uint64, ok bool) {
	f.groups.mu.RLock()
	defer f.groups.mu.RUnlock()
	home, ok = f.groups.homes[name]
	return home, ok
}

// applyGroupPlace records the group's home, the first time: 0 for a group
// this state machine holds (one from before the level) or one logd keeps
// for itself, else HashedHome over the table of data groups. A group
// already placed keeps its home. Only the meta group places groups.
func (f *FSM) applyGroupPlace(_ uint64, _ int64, c GroupPlace) any {
	if f.group != 0 {
		return fmt.Errorf("%w: group-place in data group %d; the meta group places groups", backend.ErrInvalidArgument, f.group)
	}
	if err := group.ValidateName("group", c.Group); err != nil {
		return err
	}
	if group.Internal(c.Group) {
		return uint64(0)
	}
	tab := f.DataGroups()
	f.groups.mu.Lock()
	defer f.groups.mu.Unlock()
	if h, ok := f.groups.homes[c.Group]; ok {
		return h
	}
	var home uint64
	if _, exists := f.groups.m[c.Group]; !exists {
		home = HashedHome(c.Group, tab)
	}
	if f.groups.homes == nil {
		f.groups.homes = map[string]uint64{}
	}
	f.groups.homes[c.Group] = home
	return home
}

// elsewhere refuses a command on a group whose recorded home is not this
// state machine's group. Called with c.mu held; in a data group, which
// records no homes, it refuses nothing.
func (c *consumerGroups) elsewhere(name string) error {
	if h, ok := c.homes[name]; ok && h != 0 {
		return &GroupElsewhereError{Group: name, Home: h}
	}
	return nil
}

// restoreHomes checks a snapshot's homes.
func restoreHomes(m map[string]uint64) (map[string]uint64, error) {
	if len(m) == 0 {
		return nil, nil
	}
	for name := range m {
		if err := group.ValidateName("group", name); err != nil {
			return nil, fmt.Errorf("restore: consumer group homes: %w", err)
		}
	}
	return m, nil
}

// DataGroupHomes returns the data groups the meta group placed consumer
// groups in, sorted (none before HashedGroupsLevel): the only data groups
// that hold consumer groups.
func (f *FSM) DataGroupHomes() []uint64 {
	f.groups.mu.RLock()
	defer f.groups.mu.RUnlock()
	var out []uint64
	for _, h := range f.groups.homes {
		if h != 0 && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

// GroupTopicViews returns the views of the named topics in this state
// machine (a topic it does not hold has Incarnation 0), read together
// with the index they are at: the applied index when the read began (a
// view is at that index or at the entry being applied after it), for a
// group-hosted command (apply_group_hosted.go).
func (f *FSM) GroupTopicViews(names []string) (uint64, []GroupTopic) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	index := f.applied.Load()
	out := make([]GroupTopic, len(names))
	for i, name := range names {
		out[i] = GroupTopic{Name: name}
		if t, ok := f.topics[name]; ok {
			out[i].Partitions, out[i].Incarnation = int32(len(t.Partitions)), t.CreateIndex
		}
	}
	return index, out
}
