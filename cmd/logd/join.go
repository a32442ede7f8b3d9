package main

import (
	"context"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/replication"
)

// joinVia returns replication.AskJoin over the client API: one Join call to
// a member (at its client API address, or its peer address: both serve
// Join), which forwards it to the leader, made as p says: dialed
// through its routes (a restarted node knows the registry, and reaches a
// member as it reaches it otherwise), and under peer TLS over https with
// this node's certificate, which the leader requires of a joining node.
// The retry loop is replication.(*Node).JoinCluster.
func joinVia(p replication.PeerHTTP) replication.AskJoin {
	hc := &http.Client{Transport: p.Transport(2*time.Second, false)}
	return func(ctx context.Context, member string, req replication.JoinRequest) (string, error) {
		c := logdv1connect.NewLogServiceClient(hc, p.URL(member))
		resp, err := c.Join(ctx, connect.NewRequest(&logdv1.JoinRequest{NodeId: req.ID, RaftAddress: req.RaftAddress, ApiAddress: req.APIAddress,
			FeatureLevel: uint32(req.FeatureLevel), PeerAddress: req.PeerAddress, KafkaAddress: req.KafkaAddress}))
		if err != nil {
			return "", err
		}
		return resp.Msg.LeaderId, nil
	}
}
