package server

import (
	"context"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
)

// Extend moves the lease deadline of live deliveries to now + lease_ms (the
// group's lease when 0).
func (s *Server) Extend(ctx context.Context, req *connect.Request[logdv1.ExtendRequest]) (*connect.Response[logdv1.ExtendResponse], error) {
	m := req.Msg
	if err := validateQueueNames(m.Topic, m.Group); err != nil {
		return nil, err
	}
	if m.LeaseMs < 0 {
		return nil, errInvalid("lease_ms %d is negative", m.LeaseMs)
	}
	pt, err := parseTokens(m.Tokens)
	if err != nil {
		return nil, err
	}
	var rs backend.QueueTokensResult
	if len(pt.tokens) > 0 {
		if rs, err = s.b.QueueExtend(ctx, backend.QueueExtend{Topic: m.Topic, Group: m.Group, Tokens: pt.tokens, Lease: msDur(m.LeaseMs)}); err != nil {
			return nil, toConnectError(err)
		}
	}
	out, err := pt.results(rs.Results)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&logdv1.ExtendResponse{Results: out}), nil
}
