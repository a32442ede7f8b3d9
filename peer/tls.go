package peer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
)

// Peer TLS: node-to-node traffic under mutual TLS with the cluster CA
// (docs/security.md, "Peers"). With a node's TLS set:
//
//   - the Raft port speaks TLS and admits a connection only from a node
//     certificate of the cluster CA whose node id is a member of the
//     latest Raft configuration this node knows, or any node certificate
//     while it knows none (a fresh node waiting for its leader's first
//     contact) (package replication/transport, VerifiedNode);
//   - Raft dials present this node's certificate and accept only a peer
//     that presents a node certificate (Handshake);
//   - calls to peers' client API ports or peer listeners (forwarding,
//     segment catch-up, join and the leader's questions to a joining
//     node) go over https with the client configuration, and accept only
//     a server that presents a node certificate (HTTP, HTTPClient);
//   - the segment endpoint answers only callers with a verified node
//     certificate (replication's segment_serve.go), and the leader adds a
//     node only for a caller that proved to be that node, and whose Raft
//     port presents that node's certificate (replication's join.go,
//     ErrIdentity).
//
// Raft's RPCs carry a sender id that nothing binds to the connection, so
// the checks are per connection, at accept; docs/security.md says what
// that leaves open.

// TLS is a node's TLS for node-to-node traffic. The configurations may
// reload their material through their callbacks (GetCertificate,
// GetConfigForClient, GetClientCertificate): each handshake uses what is
// current.
type TLS struct {
	// Server is the Raft listener's configuration. It must require and
	// verify client certificates of the cluster CA with Go's verifier:
	// ClientAuth tls.RequireAndVerifyClientCert with ClientCAs, directly
	// or in the configuration GetConfigForClient returns. A connection is
	// admitted only when its handshake left verified chains.
	Server *tls.Config
	// Client is the configuration of this node's dials to peers: Raft,
	// forwarding to the leader, segment catch-up, join, and the leader's
	// questions to a joining node. It presents this node's certificate
	// and verifies the server's against the cluster CA: with Go's verifier
	// (RootCAs), or, with InsecureSkipVerify, in its own VerifyConnection
	// or VerifyPeerCertificate. An empty ServerName is the host of the
	// address dialed.
	Client *tls.Config
	// NodeID returns the node id a node certificate carries (its one URI
	// SAN logd://node/<id>); ok is false for any other certificate. It is
	// only asked about certificates a handshake verified.
	NodeID func(*x509.Certificate) (id string, ok bool)
}

// Validate checks that p is complete: both sides present a certificate,
// the server verifies client certificates, and the client verifies
// servers. Its errors say what is missing; the configuration that holds p
// wraps them in its own invalid-argument error (replication.Config).
func (p *TLS) Validate() error {
	switch {
	case p.Server == nil || p.Client == nil || p.NodeID == nil:
		return errors.New("peer TLS needs a server configuration, a client configuration and a NodeID function")
	case len(p.Server.Certificates) == 0 && p.Server.GetCertificate == nil && p.Server.GetConfigForClient == nil:
		return errors.New("the peer TLS server configuration has no certificate")
	case len(p.Client.Certificates) == 0 && p.Client.GetClientCertificate == nil:
		return errors.New("the peer TLS client configuration presents no certificate")
	case p.Server.ClientAuth != tls.RequireAndVerifyClientCert && p.Server.GetConfigForClient == nil:
		return errors.New("the peer TLS server configuration must require and verify client certificates (tls.RequireAndVerifyClientCert)")
	case p.Client.InsecureSkipVerify && p.Client.VerifyConnection == nil && p.Client.VerifyPeerCertificate == nil:
		return errors.New("the peer TLS client configuration skips Go's verification and verifies nothing itself")
	}
	return nil
}

// VerifiedNode returns the node id of the node certificate a peer
// presented on a connection this node accepted, whose state is cs. It is
// a node only when the handshake verified the peer's chain (Go's verifier
// fills cs.VerifiedChains when the listener's configuration verifies
// client certificates: tls.VerifyClientCertIfGiven or stronger, with the
// cluster CA among its ClientCAs) and the leaf is a node certificate. A
// nil p (no peer TLS) or cs (plaintext) is never a node. The Raft port,
// the segment endpoint and the Join handler ask it about their callers.
func (p *TLS) VerifiedNode(cs *tls.ConnectionState) (id string, ok bool) {
	if p == nil || cs == nil || len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return "", false
	}
	return p.NodeID(cs.PeerCertificates[0])
}

// dialedNode returns the node id of the certificate the server this node
// dialed with p.Client presented.
func (p *TLS) dialedNode(cs tls.ConnectionState) (string, bool) {
	if len(cs.PeerCertificates) == 0 || !p.Client.InsecureSkipVerify && len(cs.VerifiedChains) == 0 {
		return "", false
	}
	return p.NodeID(cs.PeerCertificates[0])
}

// HTTPClient is the configuration of this node's calls to its peers' API
// ports (NewHTTP): Client, and the server must present a node
// certificate (NodeID) besides what Client verifies (its chain to the
// cluster CA, with server usage, valid now); ErrNotNode otherwise.
// crypto/tls reports no server name for an IP address, so Client checks
// no address for a peer dialed at one; this check keeps a certificate of
// the cluster CA that is not a node's (a client's, or a server
// certificate of another kind) from answering as a peer's API.
func (p *TLS) HTTPClient() *tls.Config {
	cfg := p.Client.Clone()
	verify := cfg.VerifyConnection
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if verify != nil {
			if err := verify(cs); err != nil {
				return err
			}
		}
		if _, ok := p.dialedNode(cs); !ok {
			return fmt.Errorf("%w: %s", ErrNotNode, certName(cs))
		}
		return nil
	}
	return cfg
}

// Handshake runs the client side of a TLS handshake with Client over
// raw, a connection this node dialed to addr, and returns the connection
// with the node id its server's certificate carries. It closes raw when
// it fails, or when the server is not a node. The Raft port's dials
// (package replication/transport) shake hands through it.
func (p *TLS) Handshake(ctx context.Context, raw net.Conn, addr string) (*tls.Conn, string, error) {
	cfg := p.Client
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	c := tls.Client(raw, cfg)
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, "", fmt.Errorf("tls handshake with %s: %w", addr, err)
	}
	id, ok := p.dialedNode(c.ConnectionState())
	if !ok {
		c.Close()
		return nil, "", fmt.Errorf("%s did not present a node certificate", addr)
	}
	return c, id, nil
}

// certName names the peer's certificate in an error.
func certName(cs tls.ConnectionState) string {
	if len(cs.PeerCertificates) == 0 {
		return ""
	}
	return cs.PeerCertificates[0].Subject.String()
}
