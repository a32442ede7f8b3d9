package server

import (
	"context"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/auth"
)

// ListTokens lists the tokens (never their secrets) the caller may
// describe, those of one principal if the request names it.
func (s *Server) ListTokens(ctx context.Context, req *connect.Request[logdv1.ListTokensRequest]) (*connect.Response[logdv1.ListTokensResponse], error) {
	want := ""
	if req.Msg.Principal != "" {
		p, err := auth.ParsePrincipal(req.Msg.Principal)
		if err != nil {
			return nil, errInvalid("%v", err)
		}
		want = p.String()
	}
	resp := &logdv1.ListTokensResponse{}
	for _, t := range s.sec.Tokens() {
		if (want == "" || t.Principal == want) && s.may(ctx, perm(auth.OpDescribe, auth.ResourceToken, tokenName(t.Principal))) {
			resp.Tokens = append(resp.Tokens, tokenInfoProto(t))
		}
	}
	return connect.NewResponse(resp), nil
}
