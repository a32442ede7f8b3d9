package server

import (
	"context"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// WhoAmI answers the caller's principal as this node authenticated it.
func (s *Server) WhoAmI(ctx context.Context, _ *connect.Request[logdv1.WhoAmIRequest]) (*connect.Response[logdv1.WhoAmIResponse], error) {
	info := authFrom(ctx)
	return connect.NewResponse(&logdv1.WhoAmIResponse{
		Principal: info.principal.String(), Method: info.method, Superuser: info.superuser, AuthRequired: s.auth.Required,
	}), nil
}
