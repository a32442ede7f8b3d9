package peer

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"
)

// HTTP is how this node calls its peers over HTTP, at their registered
// peer address, else their client API port
// (fsm.RegisteredNode.CallAddress): forwarding writes to the leader and
// the leader's questions to a joining node (package server), a joining
// node's Join request (cmd/logd) and segment catch-up
// (replication.SegmentClient). It is the one place that chooses the
// scheme and TLS, so the four agree: https with TLS when it is set, plain
// http otherwise. NewHTTP makes a node's; the zero value dials plaintext
// at the addresses given.
type HTTP struct {
	// Peers routes the dials (routes.go); nil dials the addresses given.
	Peers *Resolver
	// TLS is the client configuration of the calls, TLS.HTTPClient (a
	// peer's API port must present a node certificate), or nil for
	// plaintext.
	TLS *tls.Config
}

// NewHTTP is how a node whose peer TLS is p (nil: plaintext peers) calls
// its peers through peers.
func NewHTTP(peers *Resolver, p *TLS) HTTP {
	h := HTTP{Peers: peers}
	if p != nil {
		h.TLS = p.HTTPClient()
	}
	return h
}

// Scheme is the URL scheme of calls to peers: "https" or "http".
func (p HTTP) Scheme() string {
	if p.TLS != nil {
		return "https"
	}
	return "http"
}

// URL is the base URL of the client API at addr (host:port).
func (p HTTP) URL(addr string) string { return p.Scheme() + "://" + addr }

// Transport returns a new HTTP transport for calls to peers. It dials
// each address through Peers, in at most dialTimeout, and takes no proxy
// from the environment. Over TLS it offers HTTP/2 and HTTP/1.1 (the
// server picks); in plaintext it speaks HTTP/1.1, or, with h2c, only
// cleartext HTTP/2, which carries gRPC's trailers (the forwarder's
// choice). The caller may set further fields before its first use.
func (p HTTP) Transport(dialTimeout time.Duration, h2c bool) *http.Transport {
	d := &net.Dialer{Timeout: dialTimeout}
	peers := p.Peers
	t := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, peers.API(addr))
		},
		TLSHandshakeTimeout: dialTimeout,
	}
	var protocols http.Protocols
	switch {
	case p.TLS != nil:
		t.TLSClientConfig = p.TLS
		protocols.SetHTTP1(true)
		protocols.SetHTTP2(true)
		t.Protocols = &protocols
	case h2c:
		protocols.SetUnencryptedHTTP2(true)
		t.Protocols = &protocols
	}
	return t
}
