package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"net/url"
	"slices"
	"testing"
	"time"
)

// certWith is a self-signed certificate with the given common name and
// URI SANs, parsed back from DER as a peer's would be.
func certWith(t *testing.T, cn string, uris ...string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: now, NotAfter: now.Add(time.Hour)}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestIdentities: which node id, user name and principal a certificate
// carries.
func TestIdentities(t *testing.T) {
	ca := mustCA(t, "ca")
	for _, tc := range []struct {
		name      string
		cert      *x509.Certificate
		node      string // "" : not a node
		user      string
		principal string
	}{
		{name: "node from IssueNode", cert: mustNode(t, ca, "n1").Cert, node: "n1", user: "n1", principal: "Node:n1"},
		{name: "node id with :@", cert: mustNode(t, ca, "db-1:a@b").Cert, node: "db-1:a@b", user: "db-1:a@b", principal: "Node:db-1:a@b"},
		{name: "client from IssueClient", cert: mustClient(t, ca, "alice").Cert, user: "alice", principal: "alice"},
		{name: "common name only", cert: certWith(t, "bob"), user: "bob", principal: "bob"},
		{name: "user URI wins over the common name", cert: certWith(t, "bob", "logd://user/carol"), user: "carol", principal: "carol"},
		{name: "upper-case scheme and host", cert: certWith(t, "x", "LOGD://NODE/n2"), node: "n2", user: "x", principal: "Node:n2"},
		{name: "two node URIs", cert: certWith(t, "x", "logd://node/n1", "logd://node/n2"), user: "x", principal: "x"},
		{name: "two user URIs", cert: certWith(t, "x", "logd://user/a", "logd://user/b")},
		{name: "invalid user name: no fallback", cert: certWith(t, "x", "logd://user/a%20b")},
		{name: "node id with a slash", cert: certWith(t, "x", "logd://node/n1/x"), user: "x", principal: "x"},
		{name: "empty node id", cert: certWith(t, "x", "logd://node/"), user: "x", principal: "x"},
		{name: "node URI with a query", cert: certWith(t, "x", "logd://node/n1?a=b"), user: "x", principal: "x"},
		{name: "another scheme", cert: certWith(t, "x", "spiffe://node/n1"), user: "x", principal: "x"},
		{name: "nothing", cert: certWith(t, "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, ok := NodeID(tc.cert)
			if ok != (tc.node != "") || id != tc.node {
				t.Errorf("NodeID = %q, %v; want %q", id, ok, tc.node)
			}
			if got := UserName(tc.cert); got != tc.user {
				t.Errorf("UserName = %q, want %q", got, tc.user)
			}
			if got := Principal(tc.cert); got != tc.principal {
				t.Errorf("Principal = %q, want %q", got, tc.principal)
			}
		})
	}
	if _, ok := NodeID(nil); ok || UserName(nil) != "" {
		t.Fatal("a nil certificate names someone")
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
	for _, bad := range []string{"", ".hidden", "a/b", "a b", "é", string(make([]byte, 129))} {
		if _, err := ca.IssueNode(bad, nil, now, time.Hour); !errors.Is(err, ErrInvalidName) {
			t.Errorf("node id %q: %v", bad, err)
		}
		if _, err := ca.IssueClient(bad, now, time.Hour); !errors.Is(err, ErrInvalidName) {
			t.Errorf("user %q: %v", bad, err)
		}
	}
}
