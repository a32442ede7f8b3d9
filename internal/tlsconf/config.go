package tlsconf

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/logd-dev/logd/auth/certid"
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
// certificate chain against the current CA pool (the system roots
// without CA files), and its name.
//
// crypto/tls verifies against the pool the config held when it was
// built, and a reload must apply to the next handshake; so normal
// verification is switched off (InsecureSkipVerify) and VerifyConnection
// does it instead: the chain to the current pool, server usage, the
// validity period, and the name. VerifyConnection also runs for resumed
// sessions, so a server a rotation dropped is refused on resumption too.
//
// The name is the one crypto/tls reports: a DNS name from ServerName
// (which tls.Dial and net/http set from the address dialed). It reports
// none for an IP address, so a dial to an IP address verifies the chain
// and usage but not the address: ClientConfigFor checks it, and peer
// TLS checks the node id the certificate carries (docs/security.md).
// Callers that want HTTP/2 set NextProtos on their copy.
func (r *Reloader) ClientConfig() *tls.Config { return r.clientConfig("") }

// ClientConfigFor is ClientConfig for one server, whose name it verifies:
// a DNS name or an IP address (the host of the address dialed).
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
			if len(cs.PeerCertificates) == 0 {
				return ErrNoPeerCertificate
			}
			name := cmp.Or(name, cs.ServerName)
			_, err := verifyChain(r.cur.Load().pool, cs.PeerCertificates[0], cs.PeerCertificates[1:], name, x509.ExtKeyUsageServerAuth, r.now())
			switch {
			case err != nil && name == "":
				return fmt.Errorf("tlsconf: verify server: %w", err)
			case err != nil:
				return fmt.Errorf("tlsconf: verify server %q: %w", name, err)
			}
			return nil
		},
	}
}

// NodeID returns the node id of a node certificate (package
// auth/certid) that chains to this Reloader's current CA pool. A server
// whose handshake accepts client certificates of more than one CA (the
// client API with a client CA of its own) asks the peer Reloader here, so
// that only the cluster CA vouches for a node. Only cert is verified, not
// intermediates a peer sent: the bundle holds the CA that signs node
// certificates (logd cert signs them with the CA itself).
func (r *Reloader) NodeID(cert *x509.Certificate) (string, bool) {
	pool := r.cur.Load().pool
	if cert == nil || pool == nil {
		return "", false
	}
	if _, err := verifyChain(pool, cert, nil, "", x509.ExtKeyUsageAny, r.now()); err != nil {
		return "", false
	}
	return certid.NodeID(cert)
}

// verifyChain verifies leaf against roots (nil: the system roots) for
// usage at now, with intermediates and, when name is set, the name (a
// DNS name or an IP address).
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
