package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	stdlog "log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/peer"
)

// serviceCert is a certificate the CA in dir signs for 127.0.0.1, usable
// by servers and clients, that is not a node certificate: what a cluster
// CA that also signs other services' certificates issues.
func serviceCert(t *testing.T, dir, name string) tls.Certificate {
	t.Helper()
	ca := readKeyPair(t, dir, "ca")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		URIs:         []*url.URL{{Scheme: "logd", Host: "user", Path: "/" + name}},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestPeerCallsVerifyANode: a node's calls to a peer's API port, dialed
// at an IP address (for which crypto/tls checks no name), reach a server
// with a node certificate of the cluster CA and refuse one that presents
// another certificate of that CA valid for the address, so a client of
// the cluster CA cannot answer as a leader's API.
func TestPeerCallsVerifyANode(t *testing.T) {
	dir := certDir(t)
	issueNow(t, "node", "--dir", dir, "--id", "n2", "--hosts", "127.0.0.1")
	c, err := parseFlags([]string{"--tls-cert", filepath.Join(dir, "n1.crt"), "--tls-key", filepath.Join(dir, "n1.key"), "--tls-client-ca", filepath.Join(dir, "ca.crt")}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	n, err := loadTLS(c.tls, "n1", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	node, err := tls.LoadX509KeyPair(filepath.Join(dir, "n2.crt"), filepath.Join(dir, "n2.key"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cert tls.Certificate
		ok   bool
	}{
		{"node n2", node, true},
		{"a service certificate of the cluster CA", serviceCert(t, dir, "mallory"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{tc.cert}}
			srv.Config.ErrorLog = stdlog.New(io.Discard, "", 0)
			srv.StartTLS()
			defer srv.Close()
			p := peer.NewHTTP(nil, n.peer.replication())
			tr := p.Transport(2*time.Second, false)
			defer tr.CloseIdleConnections()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL(strings.TrimPrefix(srv.URL, "https://"))+"/", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err == nil {
				resp.Body.Close()
			}
			switch {
			case tc.ok && err != nil:
				t.Fatalf("call to a node: %v", err)
			case !tc.ok && !errors.Is(err, peer.ErrNotNode):
				t.Fatalf("call to a server that is not a node: %v, want %v", err, peer.ErrNotNode)
			}
		})
	}
}
