package server

import (
	"context"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/auth"
)

// maxACLsPerCall bounds the ACLs of one CreateACLs call.
const maxACLsPerCall = 1000

// CreateACLs adds ACLs; those already present are kept once. Every ACL is
// checked first: one invalid ACL refuses the call and adds none.
func (s *Server) CreateACLs(ctx context.Context, req *connect.Request[logdv1.CreateACLsRequest]) (*connect.Response[logdv1.CreateACLsResponse], error) {
	m := req.Msg
	switch {
	case len(m.Acls) == 0:
		return nil, errInvalid("no ACLs to create")
	case len(m.Acls) > maxACLsPerCall:
		return nil, errInvalid("%d ACLs in one call; at most %d", len(m.Acls), maxACLsPerCall)
	}
	acls := make([]auth.ACL, len(m.Acls))
	for i, a := range m.Acls {
		var err error
		if acls[i], err = aclFromProto(a); err != nil {
			return nil, errInvalid("ACL %d: %v", i, err)
		}
	}
	n, err := s.sec.CreateACLs(ctx, acls)
	if err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&logdv1.CreateACLsResponse{Created: int32(n)}), nil
}
