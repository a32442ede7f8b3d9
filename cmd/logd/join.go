package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/hashicorp/raft"
	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/peer"
	"github.com/logd-dev/logd/replication"
)

// joinVia returns replication.AskJoin over the client API: one Join call to
// a member (at its client API address, or its peer address: both serve
// Join), which forwards it to the leader, made as p says: dialed
// through its routes (a restarted node knows the registry, and reaches a
// member as it reaches it otherwise), and under peer TLS over https with
// this node's certificate, which the leader requires of a joining node.
// The retry loop is replication.(*Node).JoinCluster; a member's
// registration of itself (replication.Config.Register) makes the same
// call to the leader.
func joinVia(p peer.HTTP) replication.AskJoin {
	hc := &http.Client{Transport: p.Transport(2*time.Second, false)}
	return func(ctx context.Context, member string, req backend.JoinRequest) (string, error) {
		c := logdv1connect.NewLogServiceClient(hc, p.URL(member))
		resp, err := c.Join(ctx, connect.NewRequest(&logdv1.JoinRequest{NodeId: req.ID, RaftAddress: req.RaftAddress, ApiAddress: req.APIAddress,
			FeatureLevel: uint32(req.FeatureLevel), PeerAddress: req.PeerAddress, KafkaAddress: req.KafkaAddress, RegisterOnly: req.RegisterOnly,
			SecretFingerprint: req.SecretFingerprint}))
		if err != nil {
			return "", err
		}
		return resp.Msg.LeaderId, nil
	}
}

// secretVia returns replication.AskSecret over the client API: the Join
// call of joinVia with secret_only set. A member of an earlier build
// takes it for a join, which the answer shows.
func secretVia(p peer.HTTP) replication.AskSecret {
	hc := &http.Client{Transport: p.Transport(2*time.Second, false)}
	return func(ctx context.Context, member string, req backend.JoinRequest) (replication.SecretAnswer, error) {
		c := logdv1connect.NewLogServiceClient(hc, p.URL(member))
		resp, err := c.Join(ctx, connect.NewRequest(&logdv1.JoinRequest{NodeId: req.ID, RaftAddress: req.RaftAddress, ApiAddress: req.APIAddress,
			FeatureLevel: uint32(req.FeatureLevel), PeerAddress: req.PeerAddress, KafkaAddress: req.KafkaAddress, SecretOnly: true}))
		if err != nil {
			return replication.SecretAnswer{}, err
		}
		m := resp.Msg
		if !m.SecretOnly {
			return replication.SecretAnswer{LeaderID: m.LeaderId, Joined: true}, nil
		}
		a := replication.SecretAnswer{LeaderID: m.LeaderId, Required: m.SecretRequired}
		if len(m.ClusterSecret) > 0 {
			a.Secret = m.ClusterSecret
		}
		return a, nil
	}
}

// errJoinOwnCluster is a --join of a node whose data dir holds a cluster
// of its own.
var errJoinOwnCluster = errors.New("refusing --join")

// checkJoinState refuses --join when the data dir holds a cluster the node
// bootstrapped alone (logd without --join, make run): joining another
// cluster with that Raft log would merge two histories. A node that joined
// before holds a configuration with the other members, and a fresh one an
// empty configuration, so both go on. Whether a data dir of a node of
// another multi-node cluster belongs to the cluster at --join cannot be
// told here (clusters carry no identity), so that case goes on as before.
func checkJoinState(r *raft.Raft, nodeID, join string) error {
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("read the Raft configuration: %w", err)
	}
	servers := f.Configuration().Servers
	if len(servers) == 1 && servers[0].ID == raft.ServerID(nodeID) {
		return fmt.Errorf("%w %s: the data dir holds a cluster of its own, with %s as its only member (a node started without --join); "+
			"run it without --join, or give the joining node an empty data dir", errJoinOwnCluster, join, nodeID)
	}
	return nil
}
