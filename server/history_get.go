package server

import (
	"context"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
)

// GetHistory answers this node's samples of what the request names
// (history.go): a topic's produce rate; a consumer group's commit rate,
// lag in records and lag in seconds; a queue group's ack rate, backlog
// and backlog age. It is answered here, never forwarded: the samples are
// this node's view, and the answer names the node.
func (s *Server) GetHistory(ctx context.Context, req *connect.Request[logdv1.GetHistoryRequest]) (*connect.Response[logdv1.GetHistoryResponse], error) {
	m := req.Msg
	var got []historySamples
	switch {
	case m.Group != "" && m.Topic == "" && m.QueueGroup == "":
		got = s.history.get("", m.Group, "", seriesConsumeRate, seriesLagRecords, seriesLagSeconds)
	case m.Topic != "" && m.QueueGroup != "" && m.Group == "":
		got = s.history.get(m.Topic, "", m.QueueGroup, seriesConsumeRate, seriesBacklog, seriesBacklogAge)
	case m.Topic != "" && m.Group == "" && m.QueueGroup == "":
		got = s.history.get(m.Topic, "", "", seriesProduceRate)
	default:
		return nil, errInvalid("name a topic, a consumer group, or a queue group with its topic")
	}
	node := s.b.Status().NodeID
	resp := &logdv1.GetHistoryResponse{NodeId: node, IntervalMs: s.history.interval.Milliseconds(), Capacity: HistorySamples}
	for _, g := range got {
		resp.Series = append(resp.Series, &logdv1.HistorySeries{Name: g.name, Unit: seriesUnit[g.name], NodeId: node,
			TimeMs: g.timeMs, Values: g.values})
	}
	return connect.NewResponse(resp), nil
}
