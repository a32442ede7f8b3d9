package server

import (
	"context"
	"net"
	"net/http"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/replication"
)

// Join adds a node (on the leader; followers forward it). The backend
// checks the request and the node before changing anything
// (replication.(*Node).Join): it asks the node, through its Status at the
// API address it gives, who it is and how far it has applied.
func (s *Server) Join(ctx context.Context, req *connect.Request[logdv1.JoinRequest]) (*connect.Response[logdv1.JoinResponse], error) {
	m := req.Msg
	tr := s.peerProbeTransport()
	defer tr.CloseIdleConnections()
	probe := statusProbe(&http.Client{Transport: tr})
	err := s.b.Join(ctx, replication.JoinRequest{ID: m.NodeId, RaftAddress: m.RaftAddress, APIAddress: m.ApiAddress, FeatureLevel: replication.FeatureLevel(m.FeatureLevel)}, probe)
	if err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&logdv1.JoinResponse{LeaderId: s.b.NodeID()}), nil
}

// peerProbeTransport is the HTTP transport of one join's questions to
// nodes: no proxy from the environment (peers are dialed directly, through
// s.peers), and bounded dials; each question's context bounds the rest.
func (s *Server) peerProbeTransport() *http.Transport {
	d := &net.Dialer{Timeout: forwardDialTimeout}
	return &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, s.peers.API(addr))
	}}
}

// statusProbe is replication.NodeProbe over the client API: the node's
// Status.
func statusProbe(hc *http.Client) replication.NodeProbe {
	return func(ctx context.Context, addr string) (replication.NodeReport, error) {
		c := logdv1connect.NewLogServiceClient(hc, "http://"+addr)
		st, err := c.Status(ctx, connect.NewRequest(&logdv1.StatusRequest{}))
		if err != nil {
			return replication.NodeReport{}, err
		}
		m := st.Msg
		return replication.NodeReport{ID: m.NodeId, Ready: m.Ready, AppliedIndex: m.AppliedIndex, LeaderID: m.LeaderId, Term: m.Term}, nil
	}
}
