package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"

	"github.com/logd-dev/logd/server"
	"github.com/spf13/pflag"
)

// The peer listener (--peer-listen): a second HTTP listener for the calls
// nodes make to each other over HTTP (forwarded writes, segment catch-up,
// joins and the leader's questions to a joining node), so that the client
// API port serves clients only (docs/security.md, "Peers"). Raft keeps its
// own port.

// maxPeerConns bounds the peer listener's connections: a node holds a few
// to each peer (forwarding reuses one HTTP/2 connection; catch-up and join
// open short-lived ones).
const maxPeerConns = 256

// peerListenConfig is the peer listener's configuration.
type peerListenConfig struct {
	// listen is the listener's address; "" switches it off, and peers
	// call the client API port as before.
	listen string
	// advertise is the address peers call, registered with the node's
	// API address; default the address listen bound.
	advertise string
}

// addPeerListenFlags registers the peer listener's flags on fs and
// returns the function that reads them once fs is parsed.
func addPeerListenFlags(fs *pflag.FlagSet) func() (peerListenConfig, error) {
	var p peerListenConfig
	fs.StringVar(&p.listen, "peer-listen", "",
		"address of a listener for calls between nodes only (forwarded writes, segment catch-up, joins); the client port then serves no /internal/ path and trusts no forwarding header. Default off: peers call the client port (LOGD_PEER_LISTEN)")
	fs.StringVar(&p.advertise, "peer-advertise", "",
		"address other nodes call for --peer-listen; default the address it bound (LOGD_PEER_ADVERTISE)")
	return func() (peerListenConfig, error) {
		if p.listen == "" && p.advertise != "" {
			return p, errors.New("--peer-advertise needs --peer-listen")
		}
		return p, nil
	}
}

// bind binds the peer listener, before Raft starts (a port in use fails
// at once), and fills the advertised address. It takes the listener's
// connection cap out of the client cap, so that together they stay under
// the open-file limit less the reserve (connCaps), and returns both. A nil
// listener means the peer listener is off.
func (p *peerListenConfig) bind(conns server.ConnLimits) (net.Listener, server.ConnLimits, server.ConnLimits, error) {
	if p.listen == "" {
		return nil, server.ConnLimits{}, conns, nil
	}
	ln, err := net.Listen("tcp", p.listen)
	if err != nil {
		return nil, server.ConnLimits{}, conns, fmt.Errorf("peer listen on %s: %w", p.listen, err)
	}
	if p.advertise == "" {
		p.advertise = ln.Addr().String()
	}
	if host, _, err := net.SplitHostPort(p.advertise); err != nil {
		ln.Close()
		return nil, server.ConnLimits{}, conns, fmt.Errorf("--peer-advertise %q: %w", p.advertise, err)
	} else if ip, err := netip.ParseAddr(host); host == "" || err == nil && ip.IsUnspecified() {
		ln.Close()
		return nil, server.ConnLimits{}, conns, fmt.Errorf("--peer-listen %s binds every interface: give the address peers call with --peer-advertise", p.listen)
	}
	peer := server.ConnLimits{Max: maxPeerConns}
	if conns.Max > 0 {
		peer.Max = min(maxPeerConns, max(conns.Max/4, 1))
		conns.Max -= peer.Max
	}
	return ln, peer, conns, nil
}

// servePeers serves srv's PeerHandler on ln (nil: off) under limits, over
// mutual TLS with the cluster CA under peer TLS (a client certificate of
// the CA required in the handshake, and a node's required by the handler),
// and returns the HTTP server (nil when off) and the channel its Serve
// error arrives on.
func servePeers(ln net.Listener, srv *server.Server, limits limitConfig, caps server.ConnLimits, peer *peerTLS, logger *slog.Logger) (*http.Server, <-chan error) {
	if ln == nil {
		return nil, nil
	}
	pln := srv.ListenerWith(ln, "peer", caps)
	if peer != nil {
		pln = tls.NewListener(pln, peer.Server())
	}
	hs := newHTTPServer(limits, srv.PeerHandler(), logger)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(pln) }()
	return hs, errc
}
