package server

import (
	"context"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/auth"
)

// ListACLs lists the ACLs matching a filter that the caller may describe
// (describe on the ACLs of their resource type).
func (s *Server) ListACLs(ctx context.Context, req *connect.Request[logdv1.ListACLsRequest]) (*connect.Response[logdv1.ListACLsResponse], error) {
	f, err := filterFromProto(req.Msg.Filter)
	if err != nil {
		return nil, errInvalid("%v", err)
	}
	resp := &logdv1.ListACLsResponse{}
	for _, a := range s.sec.ACLs().ACLs() {
		if f.Matches(a) && s.may(ctx, aclPerm(auth.OpDescribe, a.Resource)) {
			resp.Acls = append(resp.Acls, aclProto(a))
		}
	}
	return connect.NewResponse(resp), nil
}
