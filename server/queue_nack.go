package server

import (
	"context"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/queue"
)

// Nack fails deliveries: transiently (offered again after the backoff or
// the given delay, dead-lettered after the last allowed delivery) or
// permanently (dead-lettered in the same command).
func (s *Server) Nack(ctx context.Context, req *connect.Request[logdv1.NackRequest]) (*connect.Response[logdv1.NackResponse], error) {
	m := req.Msg
	if err := validateQueueNames(m.Topic, m.Group); err != nil {
		return nil, err
	}
	raw := make([]string, len(m.Nacks))
	for i, n := range m.Nacks {
		if n == nil {
			return nil, errInvalid("nack %d is empty", i)
		}
		raw[i] = n.Token
	}
	pt, err := parseTokens(raw)
	if err != nil {
		return nil, err
	}
	cmd := backend.QueueNack{Topic: m.Topic, Group: m.Group}
	for i, n := range m.Nacks {
		if pt.index[i] < 0 {
			continue
		}
		nk := queue.Nack{Token: pt.tokens[pt.index[i]], Permanent: n.Permanent, Error: n.Error}
		if n.DelayMs != nil {
			if *n.DelayMs < 0 || msDur(*n.DelayMs) > queue.MaxDelay {
				return nil, errInvalid("nack %d: delay %d ms outside [0, %v]", i, *n.DelayMs, queue.MaxDelay)
			}
			nk.Delay, nk.HasDelay = msDur(*n.DelayMs), true
		}
		cmd.Nacks = append(cmd.Nacks, nk)
	}
	var rs backend.QueueTokensResult
	if len(cmd.Nacks) > 0 {
		if rs, err = s.b.QueueNack(ctx, cmd); err != nil {
			return nil, toConnectError(err)
		}
	}
	out, err := pt.results(rs.Results)
	if err != nil {
		return nil, err
	}
	s.metrics.records.WithLabelValues("nack").Add(float64(len(cmd.Nacks)))
	return connect.NewResponse(&logdv1.NackResponse{Results: out}), nil
}
