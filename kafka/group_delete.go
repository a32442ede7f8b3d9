package kafka

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kmsg"

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
	lead := s.groups.lead(ctx)
	for _, id := range req.Groups {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group = id
		var msg string
		switch {
		case group.ValidateName("group", id) != nil:
			dg.ErrorCode = errInvalidGroupID
		case !rc.mayGroup(id):
			dg.ErrorCode = errGroupAuthorizationFailed
		case !lead:
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

// GroupMembers returns how many members (joined, or handed a member id and
// not joined yet) a Kafka group has while this node coordinates it, 0
// otherwise. cmd/logd gives it to the backend
// (replication.Backend.SetExternalGroupMembers), so that `logctl group
// delete` refuses a group Kafka members hold, as DeleteGroups does.
func (s *Server) GroupMembers(group string) int {
	c := s.groups
	leads, term := s.b.IsLeader(), s.b.Status().Term
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[group]
	if !leads || c.closed || term != c.term || g == nil {
		return 0
	}
	return len(g.members) + len(g.pending)
}
