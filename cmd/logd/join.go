package main

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/replication"
)

// joinCluster asks the member at c.join to add this node, retrying until
// it succeeds or ctx ends. The member forwards the call to the leader,
// which adds this node as a non-voter, waits for it to catch up and
// promotes it. Joining again is harmless: a voter at the same address is
// only re-registered (so a restart with a new --advertise updates it).
func joinCluster(ctx context.Context, logger *slog.Logger, c config, node *replication.Node) {
	client := logdv1connect.NewLogServiceClient(http.DefaultClient, "http://"+c.join)
	raftAddr := c.raftAdvertise
	if raftAddr == "" {
		raftAddr = c.raftAddr
	}
	req := &logdv1.JoinRequest{NodeId: c.nodeID, RaftAddress: raftAddr, ApiAddress: c.advertise}
	for attempt := 1; ; attempt++ {
		jctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		resp, err := client.Join(jctx, connect.NewRequest(req))
		cancel()
		if err == nil {
			logger.Info("joined the cluster", "via", c.join, "leader", resp.Msg.LeaderId)
			return
		}
		if ctx.Err() != nil {
			return
		}
		logger.Warn("join failed; retrying", "via", c.join, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}
