package kafka

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
)

// deleteGroups answers DeleteGroups (versions 0 to 2), on the
// coordinator: a group without members loses its committed offsets (it
// is logd's group, deleted as `logctl group delete` deletes it);
// NON_EMPTY_GROUP while Kafka members or live members of logd's protocol
// hold it, GROUP_ID_NOT_FOUND when it does not exist,
// GROUP_AUTHORIZATION_FAILED when the principal may not delete it. Every
// group's outcome has a line in the audit log.
func (s *Server) deleteGroups(ctx context.Context, rc *reqCtx, req *kmsg.DeleteGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group = id
		var msg string
		switch {
		case group.ValidateName("group", id) != nil:
			dg.ErrorCode = errInvalidGroupID
		case !rc.mayGroup(id):
			dg.ErrorCode = errGroupAuthorizationFailed
		case !s.groups.lead(ctx, id, false):
			dg.ErrorCode = errNotCoordinator
		case s.groups.busy(id):
			dg.ErrorCode = errNonEmptyGroup
		default:
			err := s.b.DeleteGroup(ctx, id)
			dg.ErrorCode = groupCode(err)
			if err != nil {
				msg = errorMessage(err)
			} else {
				s.logger.Info("kafka: consumer group deleted", "group", id)
			}
		}
		rc.audit([]slog.Attr{slog.String("group", id)}, dg.ErrorCode, msg)
		rc.note(dg.ErrorCode)
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// busy reports whether a Kafka group has members, or member ids handed
// out and not joined yet.
func (c *coordinator) busy(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[id]
	return g != nil && (len(g.members) > 0 || len(g.pending) > 0)
}

// GroupMembers returns a Kafka group as this node's coordinator holds it
// while it leads (none otherwise): its state and its members, joined (in
// the order they joined, with their client id and host, and, for the
// "consumer" protocol type, their subscriptions and last synced
// assignment) and then those handed a member id that have not joined
// yet. cmd/logd gives it to the backend
// (replication.Backend.SetExternalGroupMembers), so that `logctl group
// delete` refuses a group Kafka members hold, as DeleteGroups does, and
// `logctl group describe` shows them.
func (s *Server) GroupMembers(id string) backend.ExternalGroup {
	c := s.groups
	leads, term := s.b.LeadsGroup(context.Background(), id, false)
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[id]
	if !leads || c.closed || g == nil || term != g.term || len(g.members)+len(g.pending) == 0 {
		return backend.ExternalGroup{}
	}
	out := backend.ExternalGroup{State: string(group.StateRebalancing), Generation: int64(g.generation), Rebalances: g.rebalances}
	switch g.state {
	case groupStable:
		out.State = string(group.StateStable)
	case groupEmpty:
		out.State = string(group.StateEmpty)
	}
	ms := make([]*kmember, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *kmember) int { return cmp.Compare(a.seq, b.seq) })
	for _, m := range ms {
		em := backend.ExternalMember{MemberID: m.id, Protocol: "kafka", ClientID: m.clientID, ClientHost: m.clientHost}
		if m.instance != nil {
			em.InstanceID = *m.instance
		}
		if g.protocolType == "consumer" {
			em.Topics, em.Partitions = consumerState(m, g.protocol)
		}
		out.Members = append(out.Members, em)
	}
	pending := slices.Sorted(maps.Keys(g.pending))
	for _, mid := range pending {
		out.Members = append(out.Members, backend.ExternalMember{MemberID: mid, Protocol: "kafka"})
	}
	return out
}

// consumerState reads a "consumer" member's subscription (from its
// metadata for the group's protocol, or its first while none is chosen)
// and its assignment, as last synced; what does not parse is left out.
func consumerState(m *kmember, protocol string) ([]string, []group.TopicPartition) {
	var topics []string
	for _, p := range m.protocols {
		if protocol != "" && p.Name != protocol {
			continue
		}
		var md kmsg.ConsumerMemberMetadata
		if md.ReadFrom(p.Metadata) == nil {
			topics = slices.Sorted(slices.Values(md.Topics))
		}
		break
	}
	var parts []group.TopicPartition
	var a kmsg.ConsumerMemberAssignment
	if len(m.assignment) > 0 && a.ReadFrom(m.assignment) == nil {
		for _, t := range a.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, group.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
		slices.SortFunc(parts, func(x, y group.TopicPartition) int {
			return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
		})
	}
	return topics, parts
}
