package replication

import (
	"errors"
)

// Errors of the Raft side.
var (
	// ErrPeerIdentity means a node-to-node request came from a caller
	// that did not prove the node identity it needs, under peer TLS: a
	// join whose caller, or whose Raft address, did not present the
	// joining node's certificate (peer_tls.go).
	ErrPeerIdentity = errors.New("replication: the caller did not prove the node identity the request needs")
	// ErrPeerNotNode means a peer's API port, called by this node under
	// peer TLS, presented a certificate of the cluster CA that is not a
	// node certificate (PeerTLS.HTTPClient).
	ErrPeerNotNode = errors.New("replication: the peer's server certificate is not a node certificate")
)
