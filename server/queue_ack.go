package server

import (
	"context"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
)

// Ack finishes deliveries; each token gets its own result (see
// TokenResult). It answers after the acks are committed and applied.
func (s *Server) Ack(ctx context.Context, req *connect.Request[logdv1.AckRequest]) (*connect.Response[logdv1.AckResponse], error) {
	m := req.Msg
	if err := validateQueueNames(m.Topic, m.Group); err != nil {
		return nil, err
	}
	pt, err := parseTokens(m.Tokens)
	if err != nil {
		return nil, err
	}
	var rs backend.QueueTokensResult
	if len(pt.tokens) > 0 {
		if rs, err = s.b.QueueAck(ctx, backend.QueueAck{Topic: m.Topic, Group: m.Group, Tokens: pt.tokens}); err != nil {
			return nil, toConnectError(err)
		}
	}
	out, err := pt.results(rs.Results)
	if err != nil {
		return nil, err
	}
	s.metrics.records.WithLabelValues("ack").Add(float64(len(pt.tokens)))
	return connect.NewResponse(&logdv1.AckResponse{Results: out}), nil
}
