package server

import (
	"context"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/group"
)

// ListGroups lists the consumer groups with their state and total lag, as
// applied on this node, those the caller may describe; internal groups (a redrive
// job's position) only when the request asks for all.
func (s *Server) ListGroups(ctx context.Context, req *connect.Request[logdv1.ListGroupsRequest]) (*connect.Response[logdv1.ListGroupsResponse], error) {
	resp := &logdv1.ListGroupsResponse{}
	now := time.Now()
	for _, g := range s.b.ConsumerGroups() {
		if group.Internal(g.Name) && !req.Msg.All || !s.may(ctx, groupPerm(auth.OpDescribe, g.Name)) {
			continue
		}
		sum := &logdv1.ConsumerGroupSummary{
			Group: g.Name, State: string(g.State()), Members: int32(len(g.Members)), Generation: g.Generation, Topics: g.TopicNames(),
		}
		for _, name := range sum.Topics {
			for i, cp := range g.Topics[name].Partitions {
				if l, ok := lagOf(s.b, name, int32(i), cp.Committed, now); ok {
					sum.LagRecords += l.Records
					sum.MaxLagSeconds = max(sum.MaxLagSeconds, l.Seconds)
				}
			}
		}
		resp.Groups = append(resp.Groups, sum)
	}
	return connect.NewResponse(resp), nil
}
