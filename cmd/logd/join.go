package main

import (
	"context"
	"net/http"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/replication"
)

// askJoin is replication.AskJoin over the client API: one Join call to a
// member, which forwards it to the leader. The retry loop is
// replication.(*Node).JoinCluster.
func askJoin(ctx context.Context, member string, req replication.JoinRequest) (string, error) {
	c := logdv1connect.NewLogServiceClient(http.DefaultClient, "http://"+member)
	resp, err := c.Join(ctx, connect.NewRequest(&logdv1.JoinRequest{NodeId: req.ID, RaftAddress: req.RaftAddress, ApiAddress: req.APIAddress, FeatureLevel: uint32(req.FeatureLevel)}))
	if err != nil {
		return "", err
	}
	return resp.Msg.LeaderId, nil
}
