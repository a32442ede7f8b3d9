package kafka

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/group"
)

// protocolTypeLogd is the protocol type ListGroups and DescribeGroups give
// a group held by members of logd's own protocol.
const protocolTypeLogd = "logd"

// listGroups answers ListGroups (versions 0 to 5): the groups this node
// coordinates, those whose home it leads (the meta group's groups on its
// leader, a data group's on its leader: docs/kafka.md, "Group
// coordinator"): the Kafka groups with members, and every replicated
// group (offsets only: Empty; held by logd's own members: their state,
// protocol type "logd"). A Kafka broker lists only its own groups, and a
// client asks every broker. Every group is of
// type "classic", but the share groups the leader coordinates (listed
// from version 5, under the "share" type). Groups the principal may not describe are left out, and
// so are logd's internal groups (group.Internal).
func (s *Server) listGroups(ctx context.Context, rc *reqCtx, req *kmsg.ListGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	if !s.waitReady(ctx) {
		return resp
	}
	states := map[string]bool{}
	for _, st := range req.StatesFilter {
		states[strings.ToLower(st)] = true
	}
	wants := func(typ string) bool {
		return len(req.TypesFilter) == 0 || slices.ContainsFunc(req.TypesFilter, func(t string) bool { return strings.EqualFold(t, typ) })
	}
	if wants("share") && req.Version >= 5 && s.share.lead(ctx) {
		// Share groups (share_describe.go), from version 5, which
		// carries the group type.
		for _, lg := range s.share.listed() {
			if len(states) > 0 && !states[strings.ToLower(lg.GroupState)] || !rc.mayGroup(lg.Group) {
				continue
			}
			resp.Groups = append(resp.Groups, lg)
		}
	}
	if !wants("classic") {
		return resp
	}
	for _, v := range s.groupViews(ctx, nil) {
		// logd's own groups (a redrive job's position) are left out, as
		// logctl group list leaves them out without --all.
		if len(states) > 0 && !states[strings.ToLower(v.state)] || !rc.mayGroup(v.id) || group.Internal(v.id) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = v.id, v.protocolType, v.state, "classic"
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}

// groupView is a group as ListGroups and DescribeGroups show it.
type groupView struct {
	id, state, protocolType, protocol string
	members                           []kmsg.DescribeGroupsResponseGroupMember
}

// groupViews returns the groups named (nil: all this node coordinates,
// sorted by id): the coordinator's Kafka groups, else the replicated
// groups; a group known to neither is missing from the result.
func (s *Server) groupViews(ctx context.Context, ids []string) []groupView {
	kafka := s.groups.views()
	var out []groupView
	add := func(id string) {
		if v, ok := kafka[id]; ok {
			out = append(out, v)
			return
		}
		g, err := s.b.ConsumerGroup(id)
		if err != nil {
			return
		}
		out = append(out, logdGroupView(g, s.groups.now().UnixNano()))
	}
	if ids != nil {
		for _, id := range ids {
			add(id)
		}
		return out
	}
	seen := map[string]bool{}
	for _, g := range s.b.LedConsumerGroups() {
		seen[g.Name] = true
	}
	for id := range kafka {
		// A group formed here while this node led its home, which it
		// may lead no longer (dropped at its next request).
		if s.groups.lead(ctx, id, false) {
			seen[id] = true
		}
	}
	all := make([]string, 0, len(seen))
	for id := range seen {
		all = append(all, id)
	}
	slices.Sort(all)
	for _, id := range all {
		add(id)
	}
	return out
}

// logdGroupView shows a replicated group: Empty when it has only offsets
// (a Kafka group between members, or a logd group without members), else
// the state of logd's own members.
func logdGroupView(g *group.ConsumerGroup, now int64) groupView {
	v := groupView{id: g.Name, state: groupEmpty.String()}
	if _, live := g.Fence(now); live == 0 {
		return v
	}
	v.protocolType = protocolTypeLogd
	v.state = groupStable.String()
	if g.State() == group.StateRebalancing {
		v.state = groupPreparingRebalance.String()
	}
	for _, id := range g.MemberIDs() {
		m := kmsg.NewDescribeGroupsResponseGroupMember()
		m.MemberID, m.ProtocolMetadata, m.MemberAssignment = id, []byte{}, []byte{}
		v.members = append(v.members, m)
	}
	return v
}

// views copies the coordinator's groups with members.
func (c *coordinator) views() map[string]groupView {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]groupView, len(c.groups))
	for id, g := range c.groups {
		if len(g.members) == 0 {
			continue
		}
		v := groupView{id: id, state: g.state.String(), protocolType: g.protocolType}
		if g.state == groupStable {
			v.protocol = g.protocol
		}
		ms := make([]*kmember, 0, len(g.members))
		for _, m := range g.members {
			ms = append(ms, m)
		}
		slices.SortFunc(ms, func(a, b *kmember) int { return int(a.seq) - int(b.seq) })
		for _, m := range ms {
			dm := kmsg.NewDescribeGroupsResponseGroupMember()
			dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, m.instance, m.clientID, "/"+m.clientHost
			dm.ProtocolMetadata, dm.MemberAssignment = []byte{}, []byte{}
			if g.state == groupStable {
				dm.ProtocolMetadata, dm.MemberAssignment = metadataFor(m, g.protocol), m.assignment
			}
			v.members = append(v.members, dm)
		}
		out[id] = v
	}
	return out
}
