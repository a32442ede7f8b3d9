package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/logd-dev/logd/auth/certid"
	"github.com/logd-dev/logd/internal/tlsconf"
	"github.com/logd-dev/logd/peer"
)

// defaultTLSReloadInterval is how often a node polls its certificate
// files for changes.
const defaultTLSReloadInterval = 30 * time.Second

// tlsConfig is the transport-security part of logd's configuration
// (docs/security.md); --auth is authConfig's (auth_flags.go).
type tlsConfig struct {
	// cert and key serve the client API over TLS; clientCA verifies
	// client certificates there (mTLS).
	cert, key, clientCA string
	// peerCert, peerKey and peerCA are the node's mutual TLS with its
	// peers, each defaulting to its API counterpart (resolvePeer).
	peerCert, peerKey, peerCA string
	// insecurePlaintext lets a node serve a non-loopback address
	// without TLS and authentication, logged at start.
	insecurePlaintext bool
	// reloadInterval is how often the certificate files are polled; 0
	// switches the watch off (SIGHUP still reloads).
	reloadInterval time.Duration
}

func (t tlsConfig) apiTLS() bool  { return t.cert != "" }
func (t tlsConfig) peerTLS() bool { return t.peerCert != "" }

// addTLSFlags registers the TLS flags on fs and
// returns the function that reads them once fs is parsed.
func addTLSFlags(fs *pflag.FlagSet) func() (tlsConfig, error) {
	var t tlsConfig
	fs.StringVar(&t.cert, "tls-cert", "", "serve the client API over TLS with this certificate (PEM; reloaded on SIGHUP and when the file changes) (LOGD_TLS_CERT)")
	fs.StringVar(&t.key, "tls-key", "", "private key of --tls-cert (PEM) (LOGD_TLS_KEY)")
	fs.StringVar(&t.clientCA, "tls-client-ca", "", "require client certificates signed by this CA bundle on the client API (mTLS) (LOGD_TLS_CLIENT_CA)")
	fs.StringVar(&t.peerCert, "peer-tls-cert", "", "this node's certificate towards its peers, a node certificate (logd cert node); default --tls-cert (LOGD_PEER_TLS_CERT)")
	fs.StringVar(&t.peerKey, "peer-tls-key", "", "private key of --peer-tls-cert; default --tls-key (LOGD_PEER_TLS_KEY)")
	fs.StringVar(&t.peerCA, "peer-tls-ca", "", "the cluster CA that signs every node's certificate; default --tls-client-ca (LOGD_PEER_TLS_CA)")
	fs.BoolVar(&t.insecurePlaintext, "insecure-allow-plaintext", false,
		"serve non-loopback addresses without TLS or without --auth required, with a warning (LOGD_INSECURE_ALLOW_PLAINTEXT=true)")
	fs.DurationVar(&t.reloadInterval, "tls-reload-interval", defaultTLSReloadInterval, "how often to check the certificate files for changes; 0: only on SIGHUP (LOGD_TLS_RELOAD_INTERVAL)")
	return func() (tlsConfig, error) {
		if t.reloadInterval < 0 {
			return t, fmt.Errorf("--tls-reload-interval: want a duration >= 0, got %s", t.reloadInterval)
		}
		if err := t.resolvePeer(); err != nil {
			return t, err
		}
		return t, t.validate()
	}
}

// resolvePeer fills the peer files from the API's. Given explicitly (any
// --peer-tls-* flag), peer TLS needs all three; taken from the API's
// alone, it is on only when they make mutual TLS (a certificate, its key
// and a CA), so that a node serving its API over TLS without client
// certificates keeps plaintext peers.
func (t *tlsConfig) resolvePeer() error {
	explicit := t.peerCert != "" || t.peerKey != "" || t.peerCA != ""
	pc, pk, pca := or(t.peerCert, t.cert), or(t.peerKey, t.key), or(t.peerCA, t.clientCA)
	switch {
	case explicit && (pc == "" || pk == "" || pca == ""):
		var missing []string
		for _, f := range []struct{ v, name string }{{pc, "--peer-tls-cert (or --tls-cert)"}, {pk, "--peer-tls-key (or --tls-key)"}, {pca, "--peer-tls-ca (or --tls-client-ca)"}} {
			if f.v == "" {
				missing = append(missing, f.name)
			}
		}
		return fmt.Errorf("peer TLS is mutual and needs a certificate, its key and the cluster CA: missing %s", strings.Join(missing, ", "))
	case explicit || pc != "" && pk != "" && pca != "":
		t.peerCert, t.peerKey, t.peerCA = pc, pk, pca
	}
	return nil
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (t tlsConfig) validate() error {
	switch {
	case (t.cert == "") != (t.key == ""):
		return errors.New("--tls-cert and --tls-key go together")
	case t.clientCA != "" && !t.apiTLS():
		return errors.New("--tls-client-ca needs --tls-cert and --tls-key: client certificates are verified in the API's TLS handshake")
	case t.peerTLS() && !t.apiTLS():
		// Nodes call each other's client API (forwarding, segment
		// catch-up, join): with peer TLS, those calls carry node
		// certificates, so the API must be on TLS too.
		return errors.New("peer TLS (--peer-tls-*) needs the client API on TLS too (--tls-cert, --tls-key): nodes call each other's API port")
	}
	return nil
}

// isLoopback reports whether addr (host:port) is on loopback only: a
// loopback IP address or "localhost". An empty host, an unspecified
// address and every other name are not (a name is not resolved: it may
// resolve elsewhere tomorrow).
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// checkExposure applies the loopback rule (docs/security.md): a node
// whose client API (--listen, --advertise) is not on loopback serves it
// over TLS with --auth required, and one whose Raft address (--raft-addr,
// --raft-advertise) or peer listener (--peer-listen, --peer-advertise) is
// not on loopback has peer TLS; otherwise it does not start, unless
// --insecure-allow-plaintext, where the returned warning says what is
// exposed (run logs it).
func (c config) checkExposure() (warning string, err error) {
	type addrFlag struct{ flag, addr string }
	exposed := func(fs ...addrFlag) []string {
		var out []string
		for _, f := range fs {
			if f.addr != "" && !isLoopback(f.addr) || f.flag == "--listen" && f.addr == "" {
				out = append(out, fmt.Sprintf("%s %s", f.flag, f.addr))
			}
		}
		return out
	}
	api := exposed(addrFlag{"--listen", c.listen}, addrFlag{"--advertise", c.advertise})
	// The peer listener carries what the Raft port does: node-to-node
	// traffic, under the same rule.
	raft := exposed(addrFlag{"--raft-addr", c.raftAddr}, addrFlag{"--raft-advertise", c.raftAdvertise},
		addrFlag{"--peer-listen", c.peer.listen}, addrFlag{"--peer-advertise", c.peer.advertise})
	var problems []string
	needs := func(addrs []string, missing []string) {
		if len(addrs) > 0 && len(missing) > 0 {
			problems = append(problems, fmt.Sprintf("%s not on loopback: it needs %s", strings.Join(addrs, ", "), strings.Join(missing, " and ")))
		}
	}
	var apiMissing []string
	if !c.tls.apiTLS() {
		apiMissing = append(apiMissing, "TLS on the client API (--tls-cert, --tls-key)")
	}
	if c.authn.mode != authRequired {
		apiMissing = append(apiMissing, "--auth required")
	}
	needs(api, apiMissing)
	if !c.tls.peerTLS() {
		needs(raft, []string{"peer TLS (--peer-tls-cert, --peer-tls-key, --peer-tls-ca, or --tls-cert, --tls-key, --tls-client-ca)"})
	}
	if len(problems) == 0 {
		return "", nil
	}
	msg := strings.Join(problems, "; ")
	if !c.tls.insecurePlaintext {
		return "", fmt.Errorf("%s; --insecure-allow-plaintext serves them without (docs/security.md)", msg)
	}
	return msg, nil
}

// nodeTLS is a node's loaded TLS material.
type nodeTLS struct {
	// api serves the client API; nil: plaintext.
	api *tlsconf.Reloader
	// apiClientAuth is the API's client-certificate policy
	// (apiClientAuthFor).
	apiClientAuth tls.ClientAuthType
	// peer is the node's mutual TLS with its peers; nil: plaintext
	// peers.
	peer *peerTLS
}

// peerTLS is the node-to-node TLS of a node: the Raft transport,
// forwarding, segment catch-up and join use its configurations
// (peer.TLS, docs/security.md "Peers").
type peerTLS struct {
	r *tlsconf.Reloader
	// ownCA: the client API verifies client certificates against the
	// peer bundle alone (no --tls-client-ca of another CA), so every
	// certificate its handshake verified is the cluster CA's.
	ownCA bool
}

// Server is the configuration of a listener that only peers dial: it
// requires a client certificate of the cluster CA (whose node id the
// caller checks, NodeID).
func (p *peerTLS) Server() *tls.Config { return p.r.ServerConfig(tls.RequireAndVerifyClientCert) }

// Client is the configuration of dials to peers: it presents the node's
// certificate and verifies the peer's against the cluster CA
// (tlsconf.Reloader.ClientConfig).
func (p *peerTLS) Client() *tls.Config { return p.r.ClientConfig() }

// NodeID is the node a certificate a handshake verified names. When the
// client API also accepts certificates of --tls-client-ca's CA, it
// verifies the certificate against the cluster CA again, so that only
// the cluster CA vouches for a node.
func (p *peerTLS) NodeID(cert *x509.Certificate) (string, bool) {
	if p.ownCA {
		return certid.NodeID(cert)
	}
	return p.r.NodeID(cert)
}

// replication is p as replication.Config.PeerTLS and
// server.Options.PeerTLS; nil p (plaintext peers) is nil.
func (p *peerTLS) replication() *peer.TLS {
	if p == nil {
		return nil
	}
	return &peer.TLS{Server: p.Server(), Client: p.Client(), NodeID: p.NodeID}
}

// apiClientAuthFor is the client API's client-certificate policy:
// required with --tls-client-ca; else, with peer TLS, verified when
// given, so that nodes present their certificates to each other's API
// and clients without one still connect (a bearer token names them);
// else none asked for.
func apiClientAuthFor(t tlsConfig) tls.ClientAuthType {
	switch {
	case t.clientCA != "":
		return tls.RequireAndVerifyClientCert
	case t.peerTLS():
		return tls.VerifyClientCertIfGiven
	}
	return tls.NoClientCert
}

// loadTLS loads the material of t; a node whose peer certificate is not
// its own node certificate does not start.
func loadTLS(t tlsConfig, nodeID string, logger *slog.Logger) (*nodeTLS, error) {
	n := &nodeTLS{apiClientAuth: apiClientAuthFor(t)}
	if t.peerTLS() {
		r, err := tlsconf.New(tlsconf.Config{CertFile: t.peerCert, KeyFile: t.peerKey, CAFiles: []string{t.peerCA}, CertFromCA: true, Logger: logger,
			Check: func(leaf *x509.Certificate) error { return isNodeCert(leaf, nodeID) }})
		if err != nil {
			return nil, fmt.Errorf("peer TLS: %w", err)
		}
		n.peer = &peerTLS{r: r, ownCA: t.clientCA == "" || t.clientCA == t.peerCA}
	}
	if t.apiTLS() {
		// The API verifies client certificates of the client CA and
		// node certificates of the cluster CA in one handshake.
		cas := []string{t.clientCA}
		if t.peerCA != t.clientCA {
			cas = append(cas, t.peerCA)
		}
		api := tlsconf.Config{CertFile: t.cert, KeyFile: t.key, CAFiles: cas, Logger: logger}
		if n.peer != nil {
			// Peers call this port and accept only a node certificate
			// (peer.TLS.HTTPClient): this node's, which a reload must
			// keep.
			api.Check = func(leaf *x509.Certificate) error {
				if err := isNodeCert(leaf, nodeID); err != nil {
					return fmt.Errorf("%w (with peer TLS, peers call the API port and accept only a node certificate)", err)
				}
				return nil
			}
		}
		r, err := tlsconf.New(api)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert: %w", err)
		}
		n.api = r
		// And one the cluster CA signed, or no peer accepts it.
		if n.peer != nil {
			if _, ok := n.peer.r.NodeID(r.Leaf()); !ok {
				return nil, fmt.Errorf("--tls-cert: %s is not signed by the cluster CA (--peer-tls-ca %s): with peer TLS, peers call the API port and accept only a node certificate of the cluster CA", t.cert, t.peerCA)
			}
		}
	}
	return n, nil
}

// errNotNodeCert: a certificate that must be this node's node
// certificate is not.
var errNotNodeCert = errors.New("not this node's node certificate")

// isNodeCert checks that leaf is node id's node certificate (URI SAN
// logd://node/<id>).
func isNodeCert(leaf *x509.Certificate, id string) error {
	switch got, ok := certid.NodeID(leaf); {
	case !ok:
		return fmt.Errorf("%w: %q is not a node certificate (URI SAN %sID): create one with logd cert node --id %s",
			errNotNodeCert, leaf.Subject.CommonName, certid.NodeURIPrefix, id)
	case got != id:
		return fmt.Errorf("%w: it is node %s's certificate, and this is --node-id %s", errNotNodeCert, got, id)
	}
	return nil
}

// reloaders are the distinct Reloaders of n.
func (n *nodeTLS) reloaders() []*tlsconf.Reloader {
	var out []*tlsconf.Reloader
	if n.api != nil {
		out = append(out, n.api)
	}
	if n.peer != nil {
		out = append(out, n.peer.r)
	}
	return out
}

// reload re-reads every certificate file (SIGHUP); what fails to load
// keeps its last good material.
func (n *nodeTLS) reload(logger *slog.Logger) {
	for _, r := range n.reloaders() {
		if err := r.Reload(); err != nil {
			logger.Error("tls: reload on SIGHUP failed; keeping the current certificate", "err", err)
			continue
		}
		leaf := r.Leaf()
		logger.Info("tls: reloaded on SIGHUP", "subject", leaf.Subject.String(), "not_after", leaf.NotAfter)
	}
}

// serveReloads reloads the material on every value of hup and watches
// the files every interval, until ctx ends; it returns once every
// goroutine it started has.
func (n *nodeTLS) serveReloads(ctx context.Context, hup <-chan os.Signal, interval time.Duration, logger *slog.Logger) {
	var wg sync.WaitGroup
	for _, r := range n.reloaders() {
		wg.Go(func() { r.Watch(ctx, interval) })
	}
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-hup:
			n.reload(logger)
		}
	}
}

// clientAuthName names a client-certificate policy in the start log.
func clientAuthName(a tls.ClientAuthType) string {
	switch a {
	case tls.RequireAndVerifyClientCert:
		return "required"
	case tls.VerifyClientCertIfGiven:
		return "verified if given"
	}
	return "not asked"
}
