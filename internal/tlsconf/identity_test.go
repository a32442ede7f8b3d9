package tlsconf

import (
	"crypto/x509"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/logd-dev/logd/auth/certid"
)

// TestIssuedIdentities: the certificates IssueNode and IssueClient make
// name the principals package auth/certid reads from them.
func TestIssuedIdentities(t *testing.T) {
	ca := mustCA(t, "ca")
	for _, tc := range []struct {
		name      string
		cert      *x509.Certificate
		node      string
		principal string
	}{
		{name: "node", cert: mustNode(t, ca, "n1").Cert, node: "n1", principal: "Node:n1"},
		{name: "node id with .-_@", cert: mustNode(t, ca, "db-1.a_b@c").Cert, node: "db-1.a_b@c", principal: "Node:db-1.a_b@c"},
		{name: "client", cert: mustClient(t, ca, "alice").Cert, principal: "User:alice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, ok := certid.NodeID(tc.cert)
			if ok != (tc.node != "") || id != tc.node {
				t.Errorf("NodeID = %q, %v; want %q", id, ok, tc.node)
			}
			if p, ok := certid.Principal(tc.cert); !ok || p.String() != tc.principal {
				t.Errorf("Principal = %v, %v; want %s", p, ok, tc.principal)
			}
		})
	}
}

// TestIssue: what NewCA, IssueNode and IssueClient put in certificates,
// and that their PEM reads back.
func TestIssue(t *testing.T) {
	ca := mustCA(t, "logd dev CA")
	if !ca.Cert.IsCA || !ca.Cert.MaxPathLenZero || ca.Cert.NotAfter.Sub(ca.Cert.NotBefore) != 24*time.Hour {
		t.Fatalf("CA: IsCA %v, path length zero %v, validity %v", ca.Cert.IsCA, ca.Cert.MaxPathLenZero, ca.Cert.NotAfter.Sub(ca.Cert.NotBefore))
	}
	node, err := ca.IssueNode("n1", []string{"127.0.0.1", " localhost", "::1", "", "db.example"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := node.Cert
	if !slices.Equal(c.DNSNames, []string{"localhost", "db.example"}) || len(c.IPAddresses) != 2 || !c.IPAddresses[1].Equal(net.IPv6loopback) {
		t.Fatalf("SANs: DNS %v, IP %v", c.DNSNames, c.IPAddresses)
	}
	if !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}) || c.IsCA {
		t.Fatalf("node usages %v, CA %v", c.ExtKeyUsage, c.IsCA)
	}
	if err := c.CheckSignatureFrom(ca.Cert); err != nil {
		t.Fatal(err)
	}
	client, err := ca.IssueClient("alice", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if c := client.Cert; !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) || c.Subject.CommonName != "alice" || len(c.DNSNames)+len(c.IPAddresses) != 0 {
		t.Fatalf("client: usages %v, CN %q, SANs %v %v", c.ExtKeyUsage, c.Subject.CommonName, c.DNSNames, c.IPAddresses)
	}
	back, err := ParseKeyPair(ca.CertPEM, ca.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := back.IssueClient("bob", now, time.Hour); err != nil {
		t.Fatalf("issue from a parsed CA: %v", err)
	}
	if _, err := ParseKeyPair(ca.CertPEM, node.KeyPEM); !errors.Is(err, ErrKeyMismatch) {
		t.Fatalf("mismatched pair: %v", err)
	}
	if _, err := node.IssueClient("bob", now, time.Hour); err == nil {
		t.Fatal("a node certificate issued a certificate")
	}
	if _, err := ca.IssueClient("bob", now, 0); err == nil {
		t.Fatal("zero validity accepted")
	}
	for _, bad := range []string{"", ".hidden", "a/b", "a b", "a:b", "é", string(make([]byte, 129))} {
		if _, err := ca.IssueNode(bad, nil, now, time.Hour); !errors.Is(err, ErrInvalidName) {
			t.Errorf("node id %q: %v", bad, err)
		}
		if _, err := ca.IssueClient(bad, now, time.Hour); !errors.Is(err, ErrInvalidName) {
			t.Errorf("user %q: %v", bad, err)
		}
	}
}
