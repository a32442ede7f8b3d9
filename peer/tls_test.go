package peer

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/logd-dev/logd/auth/certid"
	"github.com/logd-dev/logd/internal/testcerts"
)

// tlsFor is the peer TLS of a node that presents cert and trusts ca.
func tlsFor(ca *testcerts.CA, cert tls.Certificate) *TLS {
	return &TLS{Server: ca.ServerConfig(cert), Client: ca.ClientConfig(cert), NodeID: certid.NodeID}
}

// TestTLSValidate: a peer TLS that could not authenticate both sides is
// refused.
func TestTLSValidate(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	cert := ca.Node(t, "n1")
	for _, tc := range []struct {
		name string
		edit func(*TLS)
		ok   bool
	}{
		{name: "complete", ok: true},
		{name: "no NodeID", edit: func(p *TLS) { p.NodeID = nil }},
		{name: "no server configuration", edit: func(p *TLS) { p.Server = nil }},
		{name: "no client configuration", edit: func(p *TLS) { p.Client = nil }},
		{name: "server without a certificate", edit: func(p *TLS) { p.Server.Certificates = nil }},
		{name: "client without a certificate", edit: func(p *TLS) { p.Client.Certificates = nil }},
		{name: "server verifies no client", edit: func(p *TLS) { p.Server.ClientAuth = tls.RequestClientCert }},
		{name: "client verifies no server", edit: func(p *TLS) { p.Client.InsecureSkipVerify = true }},
		{name: "client verifies servers itself", ok: true, edit: func(p *TLS) {
			p.Client.InsecureSkipVerify = true
			p.Client.VerifyConnection = func(tls.ConnectionState) error { return nil }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tlsFor(ca, cert)
			if tc.edit != nil {
				tc.edit(p)
			}
			if err := p.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate: %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// TestHandshake: a dial shakes hands with a server that presents a node
// certificate of the cluster CA and learns its node id, while the server
// learns the dialer's (VerifiedNode); a server with any other
// certificate of the CA is refused, and the connection closed.
func TestHandshake(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	p := tlsFor(ca, ca.Node(t, "n1"))
	for _, tc := range []struct {
		name   string
		server tls.Certificate
		want   string // the server's node id; "": refused
	}{
		{name: "a node", server: ca.Node(t, "n2"), want: "n2"},
		{name: "a service certificate of the cluster CA", server: ca.Service(t, "mallory")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			// caller is the node id the server verified, once its
			// handshake ended.
			caller := make(chan string, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					caller <- ""
					return
				}
				defer c.Close()
				sc := tls.Server(c, ca.ServerConfig(tc.server))
				if sc.HandshakeContext(ctx) != nil {
					caller <- ""
					return
				}
				cs := sc.ConnectionState()
				id, _ := p.VerifiedNode(&cs)
				caller <- id
			}()
			raw, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			c, id, err := p.Handshake(ctx, raw, ln.Addr().String())
			if tc.want == "" {
				if err == nil {
					c.Close()
					t.Fatalf("handshake with a server that is not a node: node %q", id)
				}
				if _, err := raw.Write([]byte{0}); err == nil {
					t.Error("the refused connection is open")
				}
				<-caller
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if id != tc.want {
				t.Errorf("the server is node %q, want %q", id, tc.want)
			}
			if got := <-caller; got != "n1" {
				t.Errorf("the server verified node %q, want n1", got)
			}
		})
	}
}

// TestVerifiedNodeWithoutTLS: no peer TLS, or a plaintext connection,
// names no node.
func TestVerifiedNodeWithoutTLS(t *testing.T) {
	var none *TLS
	if id, ok := none.VerifiedNode(&tls.ConnectionState{}); ok {
		t.Errorf("nil TLS: node %q", id)
	}
	p := &TLS{NodeID: certid.NodeID}
	if id, ok := p.VerifiedNode(nil); ok {
		t.Errorf("plaintext: node %q", id)
	}
}
