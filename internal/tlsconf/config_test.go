package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"
)

// TestHandshakeRefusals: what a server verifying client certificates
// and a client of ClientConfig refuse, and what they accept.
func TestHandshakeRefusals(t *testing.T) {
	ca, other := mustCA(t, "ca"), mustCA(t, "other")
	srvNode := mustReloader(t, newFilesWith(t, mustNode(t, ca, "n1"), ca).config())
	srvOther := mustReloader(t, newFilesWith(t, mustNode(t, other, "x"), other).config())
	alice := mustReloader(t, newFilesWith(t, mustClient(t, ca, "alice"), ca).config())
	mallory := mustReloader(t, newFilesWith(t, mustClient(t, other, "mallory"), ca).config())
	// A client certificate that was valid when loaded and expired since:
	// its Reloader's clock is within both its validity and the server's
	// (from an hour ago), the server's is now.
	expiredKP, err := ca.IssueClient("bob", now.Add(-3*time.Hour), 150*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	expiredCfg := newFilesWith(t, expiredKP, ca).config()
	expiredCfg.Now = func() time.Time { return now.Add(-45 * time.Minute) }
	expired := mustReloader(t, expiredCfg)
	// A client whose clock is past the server certificate's end (its own
	// certificate loaded before).
	late := mustReloader(t, newFilesWith(t, mustClient(t, ca, "carol"), ca).config())
	late.now = func() time.Time { return now.Add(48 * time.Hour) }
	noCA := mustReloader(t, Config{CertFile: srvNode.cfg.CertFile, KeyFile: srvNode.cfg.KeyFile})

	for _, tc := range []struct {
		name       string
		srv        *tls.Config
		cli        *tls.Config
		serverName string
		cliErr     string // in the client's error; "" succeeds
		srvErr     string
	}{
		{name: "client of the CA", srv: srvNode.ServerConfig(tls.RequireAndVerifyClientCert), cli: alice.ClientConfig(), serverName: "localhost"},
		{name: "client by IP address", srv: srvNode.ServerConfig(tls.RequireAndVerifyClientCert), cli: alice.ClientConfigFor("127.0.0.1"), serverName: "127.0.0.1"},
		{name: "client of another CA", srv: srvNode.ServerConfig(tls.RequireAndVerifyClientCert), cli: mallory.ClientConfig(), serverName: "localhost",
			cliErr: "unknown certificate authority", srvErr: "unknown authority"},
		{name: "another CA, certificate optional", srv: srvNode.ServerConfig(tls.VerifyClientCertIfGiven), cli: mallory.ClientConfig(), serverName: "localhost",
			cliErr: "unknown certificate authority", srvErr: "unknown authority"},
		{name: "no client certificate, optional", srv: srvNode.ServerConfig(tls.VerifyClientCertIfGiven), cli: &tls.Config{RootCAs: poolOf(ca)}, serverName: "localhost"},
		{name: "no client certificate, required", srv: srvNode.ServerConfig(tls.RequireAndVerifyClientCert), cli: &tls.Config{RootCAs: poolOf(ca)}, serverName: "localhost",
			cliErr: "certificate required", srvErr: "didn't provide a certificate"},
		{name: "expired client certificate", srv: srvNode.ServerConfig(tls.RequireAndVerifyClientCert), cli: expired.ClientConfig(), serverName: "localhost",
			cliErr: "expired", srvErr: "expired"},
		{name: "server of another CA", srv: srvOther.ServerConfig(tls.NoClientCert), cli: alice.ClientConfig(), serverName: "localhost",
			cliErr: "unknown authority"},
		{name: "wrong server name", srv: srvNode.ServerConfig(tls.NoClientCert), cli: alice.ClientConfig(), serverName: "n2.example",
			cliErr: "is valid for"},
		{name: "wrong server IP address", srv: srvNode.ServerConfig(tls.NoClientCert), cli: alice.ClientConfigFor("10.1.2.3"), serverName: "10.1.2.3",
			cliErr: "is valid for"},
		// crypto/tls reports no name for an IP address: ClientConfig
		// checks the chain only (ClientConfigFor checks the address).
		{name: "IP address, chain only", srv: srvNode.ServerConfig(tls.NoClientCert), cli: alice.ClientConfig(), serverName: "10.1.2.3"},
		{name: "IP address, server of another CA", srv: srvOther.ServerConfig(tls.NoClientCert), cli: alice.ClientConfig(), serverName: "127.0.0.1",
			cliErr: "unknown authority"},
		{name: "expired server certificate", srv: srvNode.ServerConfig(tls.NoClientCert), cli: late.ClientConfig(), serverName: "localhost",
			cliErr: "expired"},
		{name: "client certificates without a CA", srv: noCA.ServerConfig(tls.RequireAndVerifyClientCert), cli: alice.ClientConfig(), serverName: "localhost",
			srvErr: ErrNoClientCA.Error(), cliErr: "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cerr, serr := handshake(t, tc.srv, tc.cli, tc.serverName)
			check := func(side string, err error, want string) {
				t.Helper()
				switch {
				case want == "" && err != nil:
					t.Errorf("%s: %v, want success", side, err)
				case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
					t.Errorf("%s: %v, want an error with %q", side, err, want)
				}
			}
			check("client", cerr, tc.cliErr)
			if tc.srvErr != "" || tc.cliErr == "" {
				check("server", serr, tc.srvErr)
			}
		})
	}
}

func poolOf(cas ...*KeyPair) *x509.CertPool {
	p := x509.NewCertPool()
	for _, ca := range cas {
		p.AddCert(ca.Cert)
	}
	return p
}

// TestServerALPN: the server offers HTTP/2 and HTTP/1.1, and a client
// offering neither still connects.
func TestServerALPN(t *testing.T) {
	ca := mustCA(t, "ca")
	srv := mustReloader(t, newFilesWith(t, mustNode(t, ca, "n1"), ca).config()).ServerConfig(tls.NoClientCert)
	cli := mustReloader(t, newFilesWith(t, mustClient(t, ca, "alice"), ca).config()).ClientConfig()
	for _, protos := range [][]string{{"h2", "http/1.1"}, {"http/1.1"}, nil} {
		c := cli.Clone()
		c.NextProtos = protos
		cs, cerr, serr := handshake(t, srv, c, "localhost")
		if cerr != nil || serr != nil {
			t.Fatalf("%v: client %v, server %v", protos, cerr, serr)
		}
		if want := append(protos, "")[0]; cs.NegotiatedProtocol != want {
			t.Fatalf("offered %v: negotiated %q, want %q", protos, cs.NegotiatedProtocol, want)
		}
		if cs.Version < tls.VersionTLS12 {
			t.Fatalf("version %x", cs.Version)
		}
	}
}

// TestNodeID: only a node certificate of the Reloader's own CA names a
// node, whatever CA a handshake accepted it under.
func TestNodeID(t *testing.T) {
	cluster, users := mustCA(t, "cluster"), mustCA(t, "users")
	peer := mustReloader(t, newFilesWith(t, mustNode(t, cluster, "n1"), cluster).config())
	for _, tc := range []struct {
		name string
		cert *x509.Certificate
		want string // "": not a node
	}{
		{name: "node of the cluster CA", cert: mustNode(t, cluster, "n2").Cert, want: "n2"},
		{name: "client of the cluster CA", cert: mustClient(t, cluster, "alice").Cert},
		{name: "node certificate of the users CA", cert: mustNode(t, users, "n2").Cert},
		{name: "nil", cert: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if id, ok := peer.NodeID(tc.cert); id != tc.want || ok != (tc.want != "") {
				t.Fatalf("NodeID = %q, %v; want %q", id, ok, tc.want)
			}
		})
	}
	noCA := mustReloader(t, Config{CertFile: peer.cfg.CertFile, KeyFile: peer.cfg.KeyFile})
	if id, ok := noCA.NodeID(mustNode(t, cluster, "n2").Cert); ok {
		t.Fatalf("a Reloader without CA files vouched for node %q", id)
	}
}
