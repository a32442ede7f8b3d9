package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/logd-dev/logd/internal/syncbuf"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/internal/e2e"
)

// lockedBuffer is a log destination shared by run and the test.
type lockedBuffer = syncbuf.Buffer

// certDir makes a CA, node n1's certificate and client alice's with logd
// cert in a temporary directory.
func certDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	issueNow(t, "ca", "--dir", dir)
	issueNow(t, "node", "--dir", dir, "--id", "n1", "--hosts", "127.0.0.1,localhost")
	issueNow(t, "client", "--dir", dir, "--name", "alice")
	return dir
}

// clientTLS trusts dir's CA and presents dir's certificate base ("" for
// none).
func clientTLS(t *testing.T, dir, base string) *tls.Config {
	t.Helper()
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cfg := &tls.Config{RootCAs: pool}
	if base != "" {
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, base+".crt"), filepath.Join(dir, base+".key"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// protoRecorder records the HTTP version of the last response.
type protoRecorder struct {
	rt    http.RoundTripper
	mu    sync.Mutex
	proto string
}

func (p *protoRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := p.rt.RoundTrip(r)
	if err == nil {
		p.mu.Lock()
		p.proto = resp.Proto
		p.mu.Unlock()
	}
	return resp, err
}

func (p *protoRecorder) last() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.proto
}

// TestServeTLS runs a node in process with its API on TLS and client
// certificates required: Connect and gRPC over HTTP/2, JSON over
// HTTP/1.1; plaintext, a client without a certificate and one of another
// CA are refused; SIGHUP swaps in a renewed certificate for the next
// handshake.
func TestServeTLS(t *testing.T) {
	dir := certDir(t)
	strangers := t.TempDir()
	issueNow(t, "ca", "--dir", strangers)
	issueNow(t, "client", "--dir", strangers, "--name", "mallory")

	listen := e2e.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var stderr lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- runArgs(ctx, []string{"--node-id", "n1", "--data-dir", t.TempDir(), "--listen", listen, "--raft-addr", e2e.FreeAddr(t),
			"--tls-cert", filepath.Join(dir, "n1.crt"), "--tls-key", filepath.Join(dir, "n1.key"), "--tls-client-ca", filepath.Join(dir, "ca.crt"),
			// Only SIGHUP reloads here (the watch: TestServeReloads).
			"--tls-reload-interval", "1h"}, noEnv, &stderr)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
		if t.Failed() {
			t.Logf("node log:\n%s", stderr.String())
		}
	}()

	alice := clientTLS(t, dir, "alice")
	// Each transport gets its own copy: net/http adds h2 to the
	// NextProtos of the config an HTTP/2 transport is given.
	h2 := &protoRecorder{rt: &http.Transport{TLSClientConfig: alice.Clone(), ForceAttemptHTTP2: true}}
	hc := &http.Client{Transport: h2, Timeout: 10 * time.Second}
	base := "https://" + listen
	readyCtx, readyCancel := context.WithTimeout(ctx, 60*time.Second)
	defer readyCancel()
	e2e.WaitFor(t, readyCtx, "node ready over TLS", func() bool {
		select {
		case err := <-done:
			done <- err // for the deferred check
			t.Fatalf("run ended: %v", err)
		default:
		}
		resp, err := hc.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	t.Run("connect over HTTP/2", func(t *testing.T) {
		c := logdv1connect.NewLogServiceClient(hc, base)
		if _, err := c.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "secure", Partitions: 1})); err != nil {
			t.Fatal(err)
		}
		if p := h2.last(); p != "HTTP/2.0" {
			t.Fatalf("protocol %s, want HTTP/2.0", p)
		}
	})
	t.Run("gRPC over HTTP/2", func(t *testing.T) {
		c := logdv1connect.NewLogServiceClient(hc, base, connect.WithGRPC())
		resp, err := c.ListTopics(ctx, connect.NewRequest(&logdv1.ListTopicsRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Msg.Topics) != 1 || resp.Msg.Topics[0].Name != "secure" {
			t.Fatalf("topics %v", resp.Msg.Topics)
		}
	})
	t.Run("JSON over HTTP/1.1", func(t *testing.T) {
		// A non-nil empty TLSNextProto keeps net/http on HTTP/1.1, as
		// curl --http1.1 would.
		h1 := &http.Client{Transport: &http.Transport{TLSClientConfig: alice.Clone(), TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}, Timeout: 10 * time.Second}
		resp, err := h1.Post(base+"/logd.v1.LogService/ListTopics", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 1 || !strings.Contains(string(body), `"secure"`) {
			t.Fatalf("%s %s: %s", resp.Proto, resp.Status, body)
		}
	})
	t.Run("refused", func(t *testing.T) {
		resp, err := http.Get("http://" + listen + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Error("plaintext request answered 200")
			}
		}
		for name, cfg := range map[string]*tls.Config{"no certificate": clientTLS(t, dir, ""), "another CA's certificate": withRoots(clientTLS(t, strangers, "mallory"), alice.RootCAs)} {
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
			resp, err := c.Get(base + "/readyz")
			if err == nil {
				resp.Body.Close()
				t.Errorf("%s: %s, want the handshake refused", name, resp.Status)
			}
		}
	})
	t.Run("SIGHUP reloads", func(t *testing.T) {
		old := servedCert(t, base, alice)
		issueNow(t, "node", "--dir", dir, "--id", "n1", "--hosts", "127.0.0.1,localhost", "--force")
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		reloadCtx, reloadCancel := context.WithTimeout(ctx, 10*time.Second)
		defer reloadCancel()
		e2e.WaitFor(t, reloadCtx, "the renewed certificate served", func() bool { return !servedCert(t, base, alice).Equal(old) })
		if !strings.Contains(stderr.String(), "reloaded on SIGHUP") {
			t.Fatal("no reload in the log")
		}
	})
}

func withRoots(cfg *tls.Config, roots *x509.CertPool) *tls.Config {
	cfg.RootCAs = roots
	return cfg
}

// servedCert is the certificate a new connection to base is served.
func servedCert(t *testing.T, base string, cfg *tls.Config) *x509.Certificate {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg.Clone(), DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := c.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.TLS.PeerCertificates[0]
}

// TestServeReloads: the file watch reloads changed certificates, a hup
// reloads them too, and serveReloads returns once its context ends.
func TestServeReloads(t *testing.T) {
	dir := certDir(t)
	c, err := parseFlags([]string{"--tls-cert", filepath.Join(dir, "n1.crt"), "--tls-key", filepath.Join(dir, "n1.key"), "--tls-client-ca", filepath.Join(dir, "ca.crt"),
		"--tls-reload-interval", "10ms"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	n, err := loadTLS(c.tls, "n1", logger)
	if err != nil {
		t.Fatal(err)
	}
	if n.api == nil || n.peer == nil || n.apiClientAuth != tls.RequireAndVerifyClientCert {
		t.Fatalf("loaded %+v", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	hup := make(chan os.Signal, 1)
	done := make(chan struct{})
	go func() { defer close(done); n.serveReloads(ctx, hup, c.tls.reloadInterval, logger) }()
	defer func() { cancel(); <-done }()

	oldAPI, oldPeer := n.api.Leaf(), n.peer.r.Leaf()
	issueNow(t, "node", "--dir", dir, "--id", "n1", "--force")
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	e2e.WaitFor(t, wctx, "the watch reloads both", func() bool { return !n.api.Leaf().Equal(oldAPI) && !n.peer.r.Leaf().Equal(oldPeer) })

	hup <- syscall.SIGHUP
	e2e.WaitFor(t, wctx, "the hup reload in the log", func() bool { return strings.Count(logs.String(), "reloaded on SIGHUP") == 2 })
}

// TestLoadTLSRefusesAnotherNodesCertificate: the peer certificate must
// be this node's.
func TestLoadTLSRefusesAnotherNodesCertificate(t *testing.T) {
	dir := certDir(t)
	c, err := parseFlags([]string{"--node-id", "n2", "--tls-cert", filepath.Join(dir, "n1.crt"), "--tls-key", filepath.Join(dir, "n1.key"), "--tls-client-ca", filepath.Join(dir, "ca.crt")}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, err := loadTLS(c.tls, "n2", discard); err == nil || !strings.Contains(err.Error(), "node n1's certificate") {
		t.Fatalf("loadTLS: %v", err)
	}
	c.tls.peerCert, c.tls.peerKey = filepath.Join(dir, "alice.crt"), filepath.Join(dir, "alice.key")
	if _, err := loadTLS(c.tls, "n2", discard); err == nil || !strings.Contains(err.Error(), "not a node certificate") {
		t.Fatalf("loadTLS with a client certificate: %v", err)
	}
}

// TestLoadTLSAPICertificateMustBeTheNodes: with peer TLS, peers call the
// API port and accept only a node certificate of the cluster CA, so the
// API's certificate must be this node's, signed by that CA, at start and
// at every reload.
func TestLoadTLSAPICertificateMustBeTheNodes(t *testing.T) {
	dir := certDir(t)
	other := t.TempDir()
	issueNow(t, "ca", "--dir", other)
	issueNow(t, "node", "--dir", other, "--id", "n1")
	issueNow(t, "node", "--dir", dir, "--id", "n2")
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	load := func(cert string) (*nodeTLS, error) {
		c, err := parseFlags([]string{"--tls-cert", cert + ".crt", "--tls-key", cert + ".key",
			"--peer-tls-cert", filepath.Join(dir, "n1.crt"), "--peer-tls-key", filepath.Join(dir, "n1.key"), "--peer-tls-ca", filepath.Join(dir, "ca.crt")}, noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		return loadTLS(c.tls, "n1", discard)
	}
	for _, tc := range []struct{ name, cert, err string }{
		{"a client certificate", filepath.Join(dir, "alice"), "not a node certificate"},
		{"another node's certificate", filepath.Join(dir, "n2"), "node n2's certificate"},
		{"this node's, of another CA", filepath.Join(other, "n1"), "not signed by the cluster CA"},
	} {
		if _, err := load(tc.cert); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: loadTLS: %v, want %q", tc.name, err, tc.err)
		}
	}
	n, err := load(filepath.Join(dir, "n1"))
	if err != nil {
		t.Fatal(err)
	}
	// A reload to a client certificate keeps the node's.
	leaf := n.api.Leaf()
	for _, ext := range []string{".key", ".crt"} {
		b, err := os.ReadFile(filepath.Join(dir, "alice"+ext))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "n1"+ext), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.api.Reload(); err == nil || !strings.Contains(err.Error(), "not a node certificate") {
		t.Fatalf("reload to a client certificate: %v", err)
	}
	if !n.api.Leaf().Equal(leaf) {
		t.Fatal("the API took a client certificate")
	}
}
