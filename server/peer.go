package server

import (
	"net/http"

	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/replication/catchup"
)

// The peer listener (docs/security.md, "Peers"). With
// Options.PeerListener a node serves what its peers call on a listener of
// its own (cmd/logd's --peer-listen), with PeerHandler:
//
//   - the segment endpoint (catchup.SegmentPathPrefix), for snapshot
//     catch-up;
//   - writes another node forwarded (they carry ForwardedHeader), whose
//     forwarding headers are believed as on any port: only from a verified
//     node certificate of a member (authn.go);
//   - Join, which a joining node may send here or to the client port, and
//     a member forwards here; and Status, the leader's question to a
//     joining node and to the voters before a promotion.
//
// Everything else is 404 there: a client's call belongs on the client
// port. Under peer TLS the listener requires a client certificate of the
// cluster CA (cmd/logd), and this handler answers only callers whose
// certificate is a node's (403 otherwise), so another certificate of the
// cluster CA (a client's, from a development CA that signs both) reaches
// nothing. Without peer TLS, as on a loopback cluster, anyone who reaches
// the port may call it, as anyone may call the client port.
//
// The client port (Handler) then serves no /internal/ path and drops the
// forwarding headers from every request before anything reads them: a
// call there is a client's, and is authenticated, authorized and, on a
// follower, forwarded as one.

// forwardingHeaders are the headers only a node sets on a call it
// forwards (forward.go, authn.go).
var forwardingHeaders = []string{ForwardedHeader, ForwardedNodeHeader, ForwardedPrincipalHeader, ForwardedForHeader}

// dropForwarding removes the forwarding headers from every request to
// next.
func dropForwarding(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, h := range forwardingHeaders {
			r.Header.Del(h)
		}
		next.ServeHTTP(w, r)
	})
}

// peerProcedures are the calls a node makes to a peer without forwarding
// them: a joining node's Join, and the Status the leader asks of a node.
var peerProcedures = map[string]bool{
	logdv1connect.LogServiceJoinProcedure:   true,
	logdv1connect.LogServiceStatusProcedure: true,
}

// PeerHandler returns the handler of the peer listener (Options.PeerListener):
// segments, forwarded calls, Join and Status, for nodes only under peer TLS.
func (s *Server) PeerHandler() http.Handler {
	api := s.apiHandler()
	mux := http.NewServeMux()
	mux.Handle("/"+logdv1connect.LogServiceName+"/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !peerProcedures[r.URL.Path] && r.Header.Get(ForwardedHeader) == "" {
			http.Error(w, "the peer port serves calls between nodes only; call the client API address", http.StatusNotFound)
			return
		}
		api.ServeHTTP(w, r)
	}))
	if s.segments != nil {
		mux.Handle(catchup.SegmentPathPrefix, s.segments)
	}
	var h http.Handler = mux
	if s.peerTLS != nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, ok := s.peerTLS.VerifiedNode(r.TLS); !ok {
				http.Error(w, "the peer port serves nodes of the cluster only: present a node certificate of the cluster CA", http.StatusForbidden)
				return
			}
			mux.ServeHTTP(w, r)
		})
	}
	return withRequestID(s.limiter.wrap(h, isSegmentPath))
}
