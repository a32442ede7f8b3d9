package server

import (
	"context"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/auth"
)

// DeleteACLs removes the ACLs a filter matches, or with dry_run only
// lists them. An empty filter is refused, so no call removes every ACL by
// accident.
func (s *Server) DeleteACLs(ctx context.Context, req *connect.Request[logdv1.DeleteACLsRequest]) (*connect.Response[logdv1.DeleteACLsResponse], error) {
	f, err := filterFromProto(req.Msg.Filter)
	switch {
	case err != nil:
		return nil, errInvalid("%v", err)
	case f == auth.Filter{}:
		return nil, errInvalid("empty filter: name at least one field (a principal, resource type, pattern, name, operation or effect)")
	}
	removed, err := s.sec.DeleteACLs(ctx, f, req.Msg.DryRun)
	if err != nil {
		return nil, toConnectError(err)
	}
	resp := &logdv1.DeleteACLsResponse{}
	for _, a := range removed {
		resp.Acls = append(resp.Acls, aclProto(a))
	}
	return connect.NewResponse(resp), nil
}
