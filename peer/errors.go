package peer

import "errors"

// Errors of node-to-node identity. Their messages keep the prefix
// "replication:" under which clients see them (the front ends pass the
// message on) and nodes log them.
var (
	// ErrIdentity means a node-to-node request came from a caller that
	// did not prove the node identity it needs, under peer TLS: a join
	// whose caller, or whose Raft address, did not present the joining
	// node's certificate (replication's Join).
	ErrIdentity = errors.New("replication: the caller did not prove the node identity the request needs")
	// ErrNotNode means a peer's API port, called by this node under peer
	// TLS, presented a certificate of the cluster CA that is not a node
	// certificate (TLS.HTTPClient).
	ErrNotNode = errors.New("replication: the peer's server certificate is not a node certificate")
)
