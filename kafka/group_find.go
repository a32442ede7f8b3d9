package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// coordinatorTypeGroup is FindCoordinator's key type of consumer groups.
const coordinatorTypeGroup int8 = 0

// findCoordinator answers FindCoordinator (versions 0 to 4, several keys
// from version 4): the coordinator of every group is the Raft leader,
// whichever node is asked; COORDINATOR_NOT_AVAILABLE (retriable) while no
// leader is known. Only group keys are served: logd has no transactions,
// so a transaction key is INVALID_REQUEST. A group the principal may not
// describe is GROUP_AUTHORIZATION_FAILED.
func (s *Server) findCoordinator(rc *reqCtx, req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	view := s.cluster()
	var leader *broker
	for i := range view.brokers {
		if view.brokers[i].id == view.leader {
			leader = &view.brokers[i]
		}
	}
	answer := func(key string) (id int32, host string, port int32, code int16, msg *string) {
		switch {
		case req.CoordinatorType != coordinatorTypeGroup:
			return -1, "", -1, errInvalidRequest, kmsg.StringPtr("logd coordinates consumer groups only (key type 0); it has no transactions")
		case !rc.mayGroup(key):
			return -1, "", -1, errGroupAuthorizationFailed, nil
		case leader == nil:
			return -1, "", -1, errCoordinatorNotAvailable, kmsg.StringPtr("no Raft leader is known")
		}
		return leader.id, leader.host, leader.port, errNone, nil
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
