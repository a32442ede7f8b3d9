package server

import (
	"context"
	"crypto/rand"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
)

// maxTokenTTLMs bounds a token's time to live: a hundred years.
const maxTokenTTLMs = 100 * 365 * 24 * 3600 * 1000

// CreateToken draws a token for a user and stores its verifier. It is a
// write, so the leader serves it (followers forward it): the token is drawn
// on the node that stores it, and its secret is in the response only.
func (s *Server) CreateToken(ctx context.Context, req *connect.Request[logdv1.CreateTokenRequest]) (*connect.Response[logdv1.CreateTokenResponse], error) {
	m := req.Msg
	p, err := auth.ParsePrincipal(m.Principal)
	if err != nil {
		return nil, errInvalid("%v", err)
	}
	switch {
	case p.Type != auth.TypeUser:
		return nil, errInvalid("tokens are for users; %s authenticates with its node certificate", p)
	case m.TtlMs < 0 || m.TtlMs > maxTokenTTLMs:
		return nil, errInvalid("ttl_ms %d outside [0, %d] (0: no expiry)", m.TtlMs, int64(maxTokenTTLMs))
	}
	tok, err := auth.NewToken(rand.Reader)
	if err != nil {
		return nil, toConnectError(err)
	}
	created := s.b.Now().UnixMilli()
	var expires int64
	if m.TtlMs > 0 {
		expires = created + m.TtlMs
	}
	v, err := auth.NewVerifier(tok, p, m.Description, created, expires, rand.Reader)
	if err != nil {
		return nil, errInvalid("%v", err)
	}
	by := authFrom(ctx).principal.String()
	if err := s.sec.CreateToken(ctx, v, by); err != nil {
		return nil, toConnectError(err)
	}
	info := backend.TokenInfo{ID: v.ID, Principal: v.Principal, Description: v.Description, CreatedMs: v.CreatedMs, ExpiresMs: v.ExpiresMs, CreatedBy: by}
	return connect.NewResponse(&logdv1.CreateTokenResponse{Token: tok.String(), Info: tokenInfoProto(info)}), nil
}
