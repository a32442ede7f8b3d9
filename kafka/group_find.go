package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// coordinatorTypeGroup is FindCoordinator's key type of consumer groups.
const coordinatorTypeGroup int8 = 0

// findCoordinator answers FindCoordinator (versions 0 to 4, several keys
// from version 4): the coordinator of a group is the leader of the Raft
// group that holds its state, its home (docs/kafka.md, "Group
// coordinator"): the meta group's leader for a group from before
// consumer groups were kept in data groups, else the leader of the data
// group the group's name hashed to, whichever node is asked;
// COORDINATOR_NOT_AVAILABLE (retriable) while no leader is known. Asking
// places nothing: a new group gets its home at its first JoinGroup or
// OffsetCommit, which a node that does not lead it then refuses with
// NOT_COORDINATOR, and the client asks again. Only group keys are
// served: logd has no transactions, so a transaction key is
// INVALID_REQUEST. A group the principal may not describe is
// GROUP_AUTHORIZATION_FAILED.
func (s *Server) findCoordinator(ctx context.Context, rc *reqCtx, req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	view := s.cluster()
	answer := func(key string) (id int32, host string, port int32, code int16, msg *string) {
		switch {
		case req.CoordinatorType != coordinatorTypeGroup:
			return -1, "", -1, errInvalidRequest, kmsg.StringPtr("logd coordinates consumer groups only (key type 0); it has no transactions")
		case !rc.mayGroup(key):
			return -1, "", -1, errGroupAuthorizationFailed, nil
		}
		node := s.b.GroupCoordinator(ctx, key)
		for _, b := range view.brokers {
			if node != "" && b.node == node {
				return b.id, b.host, b.port, errNone, nil
			}
		}
		return -1, "", -1, errCoordinatorNotAvailable, kmsg.StringPtr("no leader of the group's home is known")
	}
	if req.Version >= 4 {
		for _, key := range req.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key = key
			c.NodeID, c.Host, c.Port, c.ErrorCode, c.ErrorMessage = answer(key)
			rc.note(c.ErrorCode)
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return resp
	}
	resp.NodeID, resp.Host, resp.Port, resp.ErrorCode, resp.ErrorMessage = answer(req.CoordinatorKey)
	rc.note(resp.ErrorCode)
	return resp
}
