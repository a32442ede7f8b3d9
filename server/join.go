package server

import (
	"context"
	"crypto/tls"
	"net/http"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/peer"
)

// Join adds a node (on the leader; followers forward it). The backend
// checks the request and the node before changing anything
// (replication.(*Node).Join): it asks the node, through its Status at the
// peer address it gives (else its API address), who it is and how far it
// has applied; under peer
// TLS it also checks that the caller is that node (joinCaller). A member
// that asks only to be registered (register_only: a restart with a new
// build or address) takes the same path and checks.
//
// A call with secret_only, which a joining node makes before it joins,
// is answered with the cluster secret and changes nothing; it passes the
// same authorization as a join (authz.go: a cluster admin, or under peer
// TLS the node's own certificate), and this handler is reached only
// through it.
func (s *Server) Join(ctx context.Context, req *connect.Request[logdv1.JoinRequest]) (*connect.Response[logdv1.JoinResponse], error) {
	m := req.Msg
	if m.SecretOnly {
		secret, required := s.b.ClusterSecret()
		return connect.NewResponse(&logdv1.JoinResponse{LeaderId: s.b.NodeID(), ClusterSecret: secret, SecretOnly: true, SecretRequired: required}), nil
	}
	jr := backend.JoinRequest{ID: m.NodeId, RaftAddress: m.RaftAddress, APIAddress: m.ApiAddress, FeatureLevel: backend.FeatureLevel(m.FeatureLevel),
		PeerAddress: m.PeerAddress, KafkaAddress: m.KafkaAddress, RegisterOnly: m.RegisterOnly, SecretFingerprint: m.SecretFingerprint}
	jr.CallerNodeID, jr.ForwardedBy = s.joinCaller(ctx, req.Header())
	// No proxy from the environment (peers are dialed directly, through
	// s.peers), and bounded dials; each question's context bounds the
	// rest.
	tr := s.peerHTTP.Transport(forwardDialTimeout, false)
	defer tr.CloseIdleConnections()
	probe := statusProbe(&http.Client{Transport: tr}, s.peerHTTP)
	if err := s.b.Join(ctx, jr, probe); err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&logdv1.JoinResponse{LeaderId: s.b.NodeID()}), nil
}

// connStateKey carries the TLS state of a Join's connection from the
// HTTP handler (forward.go) to Join.
type connStateKey struct{}

// joinCaller returns who asked for a join, under peer TLS: the node id of
// the verified node certificate on the call's connection; or, when a node
// forwarded the call (ForwardedHeader), the node id that node found on its
// own caller's connection (ForwardedNodeHeader), and its own id. Headers
// count only on a connection with a node certificate: a client's own
// forwarding headers name nobody. The backend decides what to accept.
func (s *Server) joinCaller(ctx context.Context, h http.Header) (caller, forwardedBy string) {
	cs, _ := ctx.Value(connStateKey{}).(*tls.ConnectionState)
	id, ok := s.peerTLS.VerifiedNode(cs)
	if !ok {
		return "", ""
	}
	if h.Get(ForwardedHeader) != "" {
		return h.Get(ForwardedNodeHeader), id
	}
	return id, ""
}

// statusProbe is backend.NodeProbe over the client API: the node's
// Status, called as p says.
func statusProbe(hc *http.Client, p peer.HTTP) backend.NodeProbe {
	return func(ctx context.Context, addr string) (backend.NodeReport, error) {
		c := logdv1connect.NewLogServiceClient(hc, p.URL(addr))
		st, err := c.Status(ctx, connect.NewRequest(&logdv1.StatusRequest{}))
		if err != nil {
			return backend.NodeReport{}, err
		}
		m := st.Msg
		return backend.NodeReport{ID: m.NodeId, Ready: m.Ready, AppliedIndex: m.AppliedIndex, LeaderID: m.LeaderId, Term: m.Term}, nil
	}
}
