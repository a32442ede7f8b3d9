package tlsconf

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"sync/atomic"
	"time"
)

// nextProtos are the ALPN protocols a server offers: HTTP/2 for gRPC and
// Connect, HTTP/1.1 for JSON and curl. Callers that speak neither (a
// Raft stream) simply offer no ALPN.
var nextProtos = []string{"h2", "http/1.1"}

// ServerConfig is a server configuration that presents the current
// certificate and, when clientAuth verifies client certificates
// (VerifyClientCertIfGiven, RequireAndVerifyClientCert), verifies them
// against the current CA pool. Each handshake takes the material current
// at its start. With such a clientAuth and no CA files every handshake
// fails with ErrNoClientCA: the system roots never vouch for a client.
// TLS 1.2 is the minimum.
func (r *Reloader) ServerConfig(clientAuth tls.ClientAuthType) *tls.Config {
	type entry struct {
		m   *material
		cfg *tls.Config
	}
	// One config per generation of material: crypto/tls initializes a
	// config returned by GetConfigForClient once, and it must not change
	// after.
	var cache atomic.Pointer[entry]
	verifies := clientAuth >= tls.VerifyClientCertIfGiven
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: nextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := r.cur.Load()
			if e := cache.Load(); e != nil && e.m == m {
				return e.cfg, nil
			}
			if verifies && m.pool == nil {
				return nil, ErrNoClientCA
			}
			cfg := &tls.Config{
				MinVersion:   tls.VersionTLS12,
				NextProtos:   nextProtos,
				Certificates: []tls.Certificate{m.cert},
				ClientAuth:   clientAuth,
				ClientCAs:    m.pool,
				Time:         r.now,
			}
			// Tickets of an older generation do not decrypt, so every
			// session after a reload starts with a full handshake under
			// the new material (crypto/tls would also recheck a resumed
			// client chain against the new ClientCAs).
			cfg.SetSessionTicketKeys([][32]byte{m.ticketKey})
			cache.Store(&entry{m, cfg})
			return cfg, nil
		},
	}
}

// ClientConfig is a client configuration that presents the current
// certificate to servers that ask for one and verifies the server's
// certificate chain and name against the current CA pool (the system
// roots without CA files).
//
// crypto/tls verifies against the pool the config held when it was
// built, and a reload must apply to the next handshake; so normal
// verification is switched off (InsecureSkipVerify) and VerifyConnection
// does it in full instead: the chain to the current pool, server usage,
// the validity period, and the server's name. VerifyConnection also runs
// for resumed sessions, so a server a rotation dropped is refused on
// resumption too.
//
// The name is the one crypto/tls reports, a DNS name from ServerName
// (which tls.Dial and net/http set from the address dialed). crypto/tls
// reports no name for an IP address: such a handshake fails with
// ErrNoServerName rather than skip the check; dial IP addresses with
// ClientConfigFor. Callers that want HTTP/2 set NextProtos on their copy.
func (r *Reloader) ClientConfig() *tls.Config { return r.clientConfig("") }

// ClientConfigFor is ClientConfig for one server, verified by name: a
// DNS name or an IP address (host of the address dialed, without port).
func (r *Reloader) ClientConfigFor(serverName string) *tls.Config {
	cfg := r.clientConfig(serverName)
	cfg.ServerName = serverName
	return cfg
}

func (r *Reloader) clientConfig(name string) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // verified by VerifyConnection, against the current pool
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &r.cur.Load().cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			name := cmp.Or(name, cs.ServerName)
			if name == "" {
				return ErrNoServerName
			}
			if len(cs.PeerCertificates) == 0 {
				return ErrNoPeerCertificate
			}
			_, err := verifyChain(r.cur.Load().pool, cs.PeerCertificates[0], cs.PeerCertificates[1:], name, x509.ExtKeyUsageServerAuth, r.now())
			if err != nil {
				return fmt.Errorf("tlsconf: verify server %q: %w", name, err)
			}
			return nil
		},
	}
}

// VerifyNode returns the node id of the peer on a server-side
// connection, after verifying its certificate chain against this
// Reloader's current CA pool for client use. A server whose handshake
// accepted client certificates of more than one CA (the client API with
// its own client CA) asks the peer Reloader here, so that only the
// cluster CA can vouch for a node.
func (r *Reloader) VerifyNode(cs *tls.ConnectionState) (string, error) {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return "", ErrNoPeerCertificate
	}
	leaf := cs.PeerCertificates[0]
	pool := r.cur.Load().pool
	if pool == nil {
		return "", ErrNoClientCA
	}
	if _, err := verifyChain(pool, leaf, cs.PeerCertificates[1:], "", x509.ExtKeyUsageClientAuth, r.now()); err != nil {
		return "", fmt.Errorf("tlsconf: verify node: %w", err)
	}
	id, ok := NodeID(leaf)
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrNotNode, leaf.Subject.CommonName)
	}
	return id, nil
}

// verifyChain verifies leaf against roots (nil: the system roots) for
// usage at now, with intermediates and, when name is set, the name.
func verifyChain(roots *x509.CertPool, leaf *x509.Certificate, intermediates []*x509.Certificate, name string, usage x509.ExtKeyUsage, now time.Time) ([][]*x509.Certificate, error) {
	opts := x509.VerifyOptions{
		Roots:       roots,
		DNSName:     name,
		KeyUsages:   []x509.ExtKeyUsage{usage},
		CurrentTime: now,
	}
	if len(intermediates) > 0 {
		opts.Intermediates = x509.NewCertPool()
		for _, c := range intermediates {
			opts.Intermediates.AddCert(c)
		}
	}
	return leaf.Verify(opts)
}
