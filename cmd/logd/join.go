package main

import (
	"context"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/replication"
)

// joinVia returns replication.AskJoin over the client API: one Join call to
// a member, which forwards it to the leader, dialed through peers (a
// restarted node knows the registry, and reaches a member as it reaches it
// otherwise). The retry loop is replication.(*Node).JoinCluster.
func joinVia(peers *replication.PeerResolver) replication.AskJoin {
	d := &net.Dialer{Timeout: 2 * time.Second}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, peers.API(addr))
	}}}
	return func(ctx context.Context, member string, req replication.JoinRequest) (string, error) {
		c := logdv1connect.NewLogServiceClient(hc, "http://"+member)
		resp, err := c.Join(ctx, connect.NewRequest(&logdv1.JoinRequest{NodeId: req.ID, RaftAddress: req.RaftAddress, ApiAddress: req.APIAddress, FeatureLevel: uint32(req.FeatureLevel)}))
		if err != nil {
			return "", err
		}
		return resp.Msg.LeaderId, nil
	}
}
