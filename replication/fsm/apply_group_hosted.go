package fsm

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
)

// Consumer groups in a data group (from HashedGroupsLevel;
// docs/architecture.md, "Consumer groups"). A data group's Apply never
// reads the meta group's state, yet a consumer group's commands need to
// know its topics: a topic's partition count (to assign partitions) and
// its incarnation (to drop offsets of a topic deleted or created again).
// So each command on a group whose home is a data group is wrapped in a
// group-hosted command that carries the views of those topics the
// proposer read from its replica of the meta group, with the meta
// group's index it read them at. The data group keeps the latest view of
// each topic its groups named (its catalog): a view read at a higher
// meta index replaces one read at a lower one, so proposers whose meta
// replicas lag differently never move the catalog backwards. Every
// command that makes a group name a topic (a join, a commit, a reset)
// carries that topic's view, so the catalog knows every topic a group
// names. A view that grows a topic's partitions rebalances the groups
// subscribed to it, as the meta group's create-partitions does.
//
// A partition's end bounds an offset as in the meta group: the end of a
// partition this data group hosts is its applied end; any other's is the
// end the command carries (PartitionEnd).

// GroupTopic is a topic as the meta group knew it when a group-hosted
// command was proposed: Incarnation is its CreateIndex, 0 for a topic that
// does not exist (deleted, or never created).
type GroupTopic struct {
	Name        string `json:"name"`
	Partitions  int32  `json:"partitions,omitempty"`
	Incarnation uint64 `json:"incarnation,omitempty"`
}

// groupTopicEntry is a topic in a data group's catalog: its latest view
// and the meta group's index the view was read at.
type groupTopicEntry struct {
	GroupTopic
	index uint64
}

// groupTopicManifest is a catalog entry in a snapshot.
type groupTopicManifest struct {
	GroupTopic
	MetaIndex uint64 `json:"meta_index"`
}

// GroupHosted is a consumer group command applied in the group's home
// data group (CmdGroupHosted): Command is the encoded command (a group
// join, heartbeat, leave, commit, reset, auto-reset, delete or
// set-offsets; unsealed, its time ignored for the wrapper's), Topics the
// views of the topics it needs, read at the meta group's index MetaIndex.
// The result is the inner command's.
type GroupHosted struct {
	MetaIndex uint64       `json:"meta_index"`
	Topics    []GroupTopic `json:"topics,omitempty"`
	Command   []byte       `json:"command"`

	// kind and body are the decoded inner command, apply its row's
	// apply (set by openHosted: the command table's rows cannot name the
	// table).
	kind  CommandType
	body  any
	apply func(f *FSM, index uint64, now int64, body any) any
}

// hostedKinds are the commands a group-hosted command may wrap.
var hostedKinds = map[CommandType]bool{
	CmdGroupJoin: true, CmdGroupHeartbeat: true, CmdGroupLeave: true, CmdGroupCommit: true,
	CmdGroupResetOffsets: true, CmdGroupAutoReset: true, CmdGroupDelete: true, CmdGroupSetOffsets: true,
}

// NewGroupHosted wraps inner, an encoded group command whose decoded body
// is body, with the topic views it needs read at the meta group's index
// metaIndex. It returns the wrapper, for a dry run (FSM.DryRunGroup), and
// its encoding stamped with now, unsealed.
func NewGroupHosted(now int64, metaIndex uint64, topics []GroupTopic, inner []byte) (GroupHosted, []byte, error) {
	c, err := openHosted(GroupHosted{MetaIndex: metaIndex, Topics: topics, Command: inner}, &keyScratch{})
	if err != nil {
		return GroupHosted{}, nil, err
	}
	data, err := encodeJSONCommand(CmdGroupHosted, now, c)
	return c, data, err
}

// decodeGroupHosted decodes the wrapper; decodeCommandWith then opens the
// command it wraps (openHosted).
func decodeGroupHosted(p []byte, _ byte, _ *keyScratch) (GroupHosted, error) {
	var c GroupHosted
	if err := json.Unmarshal(p, &c); err != nil {
		return c, fmt.Errorf("%w: group-hosted: %v", backend.ErrBadCommand, err)
	}
	return c, nil
}

// openHosted decodes the command c wraps; a command of another kind, or
// one that does not decode, is malformed.
func openHosted(c GroupHosted, scratch *keyScratch) (GroupHosted, error) {
	env, err := decodeCommandWith(c.Command, scratch)
	if err != nil {
		return c, fmt.Errorf("%w: group-hosted: the command it wraps: %w", backend.ErrBadCommand, err)
	}
	if !hostedKinds[env.Type] {
		return c, fmt.Errorf("%w: group-hosted wraps %s", backend.ErrBadCommand, env.Type)
	}
	c.kind, c.body, c.apply = env.Type, env.Body, commands[env.Type].apply
	return c, nil
}

// applyGroupHosted learns the topic views, then applies the wrapped
// command at this entry's index and time. Views that do not make sense
// (no name, a name twice, partitions without a topic) refuse the whole
// command, and nothing changes. Only a data group applies it: the meta
// group reads its own topics.
func (f *FSM) applyGroupHosted(index uint64, now int64, c GroupHosted) any {
	if f.group == 0 {
		return fmt.Errorf("%w: group-hosted in the meta group; it applies in a consumer group's home data group", backend.ErrInvalidArgument)
	}
	seen := map[string]bool{}
	for _, v := range c.Topics {
		if v.Name == "" || seen[v.Name] || v.Partitions < 0 || v.Incarnation == 0 && v.Partitions != 0 {
			return fmt.Errorf("%w: group-hosted: topic view %+v", group.ErrInvalidGroupRequest, v)
		}
		seen[v.Name] = true
	}
	if c.apply == nil {
		return fmt.Errorf("%w: group-hosted without the command it wraps", backend.ErrBadCommand)
	}
	f.learnGroupTopics(now, c.MetaIndex, c.Topics)
	return c.apply(f, index, now, c.body)
}

// learnGroupTopics merges views read at the meta group's index into the
// catalog (a view replaces one read at a lower index), and rebalances the
// groups subscribed to a topic a view grew.
func (f *FSM) learnGroupTopics(now int64, index uint64, views []GroupTopic) {
	if len(views) == 0 {
		return
	}
	f.groups.mu.Lock()
	defer f.groups.mu.Unlock()
	var grew []string
	for _, v := range views {
		old, ok := f.groups.topics[v.Name]
		if ok && old.index >= index {
			continue
		}
		if f.groups.topics == nil {
			f.groups.topics = map[string]groupTopicEntry{}
		}
		f.groups.topics[v.Name] = groupTopicEntry{GroupTopic: v, index: index}
		if ok && v.Incarnation != 0 && v.Incarnation == old.Incarnation && v.Partitions > old.Partitions {
			grew = append(grew, v.Name)
		}
	}
	if len(grew) == 0 {
		return
	}
	slices.Sort(grew)
	topics := fsmTopics{f: f}
	for _, name := range slices.Sorted(maps.Keys(f.groups.m)) {
		for _, t := range grew {
			f.groups.m[name].TopicGrew(now, t, topics)
		}
	}
}

// GroupTopicView returns the view of a topic in this data group's
// catalog; ok is false when its groups never named it.
func (f *FSM) GroupTopicView(name string) (GroupTopic, bool) {
	f.groups.mu.RLock()
	defer f.groups.mu.RUnlock()
	e, ok := f.groups.topics[name]
	return e.GroupTopic, ok
}

// hostedEnd is EndOffset in a data group: the end the command carries,
// else the applied end of a partition this data group hosts of the
// catalog's incarnation of the topic, else 0 (above which every offset
// is refused).
func (t fsmTopics) hostedEnd(topic string, p int32) int64 {
	if end, ok := endOf(t.ends, topic, p); ok {
		return end
	}
	view := t.f.groups.topics[topic]
	tp, err := t.f.Topic(topic)
	if err != nil || view.Incarnation == 0 || tp.CreateIndex != view.Incarnation {
		return 0
	}
	part, err := tp.Partition(p)
	if err != nil {
		return 0
	}
	if t.f.dryRun {
		return part.log.EndOffset()
	}
	return part.next
}

// topicsManifest is the catalog for a snapshot, sorted by name. Called
// with c.mu held.
func (c *consumerGroups) topicsManifest() []groupTopicManifest {
	if len(c.topics) == 0 {
		return nil
	}
	out := make([]groupTopicManifest, 0, len(c.topics))
	for _, name := range slices.Sorted(maps.Keys(c.topics)) {
		e := c.topics[name]
		out = append(out, groupTopicManifest{GroupTopic: e.GroupTopic, MetaIndex: e.index})
	}
	return out
}

// restoreGroupTopics checks a snapshot's catalog.
func restoreGroupTopics(m []groupTopicManifest) (map[string]groupTopicEntry, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]groupTopicEntry, len(m))
	for _, e := range m {
		if _, dup := out[e.Name]; dup || e.Name == "" || e.Partitions < 0 {
			return nil, fmt.Errorf("restore: consumer groups' topics: %+v", e)
		}
		out[e.Name] = groupTopicEntry{GroupTopic: e.GroupTopic, index: e.MetaIndex}
	}
	return out, nil
}
