package server

import (
	"context"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/auth"
)

// RevokeToken removes a token's verifier: the next call with the token is
// UNAUTHENTICATED.
func (s *Server) RevokeToken(ctx context.Context, req *connect.Request[logdv1.RevokeTokenRequest]) (*connect.Response[logdv1.RevokeTokenResponse], error) {
	if err := auth.ValidTokenID(req.Msg.Id); err != nil {
		return nil, errInvalid("%v", err)
	}
	info, err := s.sec.RevokeToken(ctx, req.Msg.Id)
	if err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&logdv1.RevokeTokenResponse{Info: tokenInfoProto(info)}), nil
}
