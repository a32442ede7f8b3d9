package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/internal/syncbuf"

	"github.com/logd-dev/logd/auth/certid"
)

// waitUntil polls cond every few milliseconds for up to 10 s: Watch runs
// on its own ticker, so there is no event to wait on.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// syncBuffer is a log destination shared by Watch and the test.
type syncBuffer = syncbuf.Buffer

// TestWatchReloadsChangedFiles: Watch notices replaced files, the next
// handshake presents the new certificate, and a change that does not
// load is logged once and leaves the last good one.
func TestWatchReloadsChangedFiles(t *testing.T) {
	ca := mustCA(t, "ca")
	f := newFiles(t)
	first := mustNode(t, ca, "n1")
	f.write(t, first, ca)
	var logs syncBuffer
	cfg := f.config()
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	r := mustReloader(t, cfg)
	// Built before the change: it must serve what is current at each
	// handshake.
	srvCfg := r.ServerConfig(tls.RequireAndVerifyClientCert)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Watch(ctx, 5*time.Millisecond) }()
	defer func() { cancel(); <-done }()

	second := mustNode(t, ca, "n1")
	f.write(t, second, ca)
	waitUntil(t, "reload of the new certificate", func() bool { return r.Leaf().Equal(second.Cert) })
	client := mustReloader(t, newFilesWith(t, mustClient(t, ca, "alice"), ca).config())
	cs, cerr, serr := handshake(t, srvCfg, client.ClientConfig(), "localhost")
	if cerr != nil || serr != nil {
		t.Fatalf("handshake after reload: client %v, server %v", cerr, serr)
	}
	if !cs.PeerCertificates[0].Equal(second.Cert) {
		t.Fatalf("server presented %v, want the reloaded certificate", cs.PeerCertificates[0].SerialNumber)
	}

	// A key that is not the certificate's: logged, not loaded. (The
	// rewrite above replaced three files one by one, so a poll may have
	// seen, and logged, a new key beside the old certificate: count from
	// here.)
	before := strings.Count(logs.String(), "do not load")
	writeFile(t, f.key, mustNode(t, ca, "n1").KeyPEM)
	waitUntil(t, "the failed reload in the log", func() bool { return strings.Count(logs.String(), "do not load") > before })
	if !r.Leaf().Equal(second.Cert) {
		t.Fatal("a key that does not match replaced the good material")
	}
	// Polls go on over the same bad files without logging them again.
	// Nothing marks a poll that logs nothing, so the test gives the
	// watch some twenty of them.
	time.Sleep(100 * time.Millisecond)
	if n := strings.Count(logs.String(), "do not load") - before; n != 1 {
		t.Fatalf("the same bad files logged %d times, want once", n)
	}
	third := mustNode(t, ca, "n1")
	f.write(t, third, ca)
	waitUntil(t, "reload after the files are fixed", func() bool { return r.Leaf().Equal(third.Cert) })
}

func newFilesWith(t *testing.T, kp *KeyPair, cas ...*KeyPair) files {
	t.Helper()
	f := newFiles(t)
	f.write(t, kp, cas...)
	return f
}

// errNotNode is the refusal of TestReloadKeepsLastGoodMaterial's Check.
var errNotNode = errors.New("not a node certificate")

// TestReloadKeepsLastGoodMaterial: files that do not load leave the
// current material, and Reload says why.
func TestReloadKeepsLastGoodMaterial(t *testing.T) {
	ca, other := mustCA(t, "ca"), mustCA(t, "other")
	good := mustNode(t, ca, "n1")
	expired, err := ca.IssueNode("n1", nil, now.Add(-3*time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	future, err := ca.IssueNode("n1", nil, now.Add(time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		write func(f files)
		want  error  // errors.Is, or nil for text
		text  string // in the error
	}{
		{name: "key of another certificate", want: ErrKeyMismatch, write: func(f files) {
			writeFile(t, f.key, mustNode(t, ca, "n1").KeyPEM)
		}},
		{name: "expired certificate", want: ErrExpired, write: func(f files) { f.write(t, expired, ca) }},
		{name: "not yet valid", want: ErrNotYetValid, write: func(f files) { f.write(t, future, ca) }},
		{name: "certificate of another CA", want: ErrNotFromCA, write: func(f files) { f.write(t, mustNode(t, other, "n1"), ca) }},
		{name: "empty CA bundle", want: ErrNoCertificate, write: func(f files) { writeFile(t, f.ca, nil) }},
		{name: "garbage certificate", want: ErrNoCertificate, write: func(f files) { writeFile(t, f.cert, []byte("not PEM")) }},
		{name: "key in the certificate file", text: `PEM block "PRIVATE KEY"`, write: func(f files) { writeFile(t, f.cert, good.KeyPEM) }},
		{name: "missing key", want: os.ErrNotExist, write: func(f files) { os.Remove(f.key) }},
		{name: "refused by Check", want: errNotNode, write: func(f files) { f.write(t, mustClient(t, ca, "alice"), ca) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFilesWith(t, good, ca)
			cfg := f.config()
			cfg.CertFromCA = true
			cfg.Check = func(leaf *x509.Certificate) error {
				if _, ok := certid.NodeID(leaf); !ok {
					return errNotNode
				}
				return nil
			}
			r := mustReloader(t, cfg)
			tc.write(f)
			err := r.Reload()
			switch {
			case err == nil:
				t.Fatal("Reload accepted bad files")
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("Reload: %v, want %v", err, tc.want)
			case !strings.Contains(err.Error(), tc.text):
				t.Fatalf("Reload: %v, want %q in it", err, tc.text)
			}
			if !r.Leaf().Equal(good.Cert) {
				t.Fatal("bad files replaced the current certificate")
			}
			client := mustReloader(t, newFilesWith(t, mustClient(t, ca, "alice"), ca).config())
			if _, cerr, serr := handshake(t, r.ServerConfig(tls.RequireAndVerifyClientCert), client.ClientConfigFor("127.0.0.1"), "127.0.0.1"); cerr != nil || serr != nil {
				t.Fatalf("handshake on the kept material: client %v, server %v", cerr, serr)
			}
			// New refuses what Reload keeps out.
			if _, err := New(cfg); err == nil {
				t.Fatal("New accepted bad files")
			}
		})
	}
}

// TestRotationRefusesOldCertificates: after the CA bundle and the
// server's certificate are replaced by a new CA's, a client whose
// certificate the old CA signed is refused at its next handshake, even
// one that resumes a session made before the rotation; a client of the
// new CA is let in.
func TestRotationRefusesOldCertificates(t *testing.T) {
	oldCA, newCA := mustCA(t, "old"), mustCA(t, "new")
	srvFiles := newFilesWith(t, mustNode(t, oldCA, "n1"), oldCA)
	srv := mustReloader(t, srvFiles.config())
	srvCfg := srv.ServerConfig(tls.RequireAndVerifyClientCert)

	// The old client trusts both CAs: the server must be the one that
	// refuses it.
	oldClient := mustReloader(t, newFilesWith(t, mustClient(t, oldCA, "alice"), oldCA, newCA).config()).ClientConfig()
	oldClient.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	for i := range 2 {
		cs, cerr, serr := handshake(t, srvCfg, oldClient, "localhost")
		if cerr != nil || serr != nil {
			t.Fatalf("before rotation: client %v, server %v", cerr, serr)
		}
		if i == 1 && !cs.DidResume {
			t.Fatal("the second connection did not resume: the test would not cover resumption")
		}
	}

	srvFiles.write(t, mustNode(t, newCA, "n1"), newCA)
	if err := srv.Reload(); err != nil {
		t.Fatal(err)
	}
	cs, cerr, serr := handshake(t, srvCfg, oldClient, "localhost")
	if cerr == nil || serr == nil {
		t.Fatalf("old client after rotation: client %v, server %v (resumed %v); want both to fail", cerr, serr, cs.DidResume)
	}
	if !strings.Contains(serr.Error(), "unknown authority") {
		t.Fatalf("server: %v, want the client's certificate refused", serr)
	}
	newClient := mustReloader(t, newFilesWith(t, mustClient(t, newCA, "alice"), newCA).config()).ClientConfig()
	if _, cerr, serr := handshake(t, srvCfg, newClient, "localhost"); cerr != nil || serr != nil {
		t.Fatalf("new client after rotation: client %v, server %v", cerr, serr)
	}
}

// TestClientRefusesRotatedOutServer: a client whose bundle a reload
// replaced refuses a server of the old CA, on resumption too.
func TestClientRefusesRotatedOutServer(t *testing.T) {
	oldCA, newCA := mustCA(t, "old"), mustCA(t, "new")
	srv := mustReloader(t, newFilesWith(t, mustNode(t, oldCA, "n1"), oldCA).config()).ServerConfig(tls.NoClientCert)
	cliFiles := newFilesWith(t, mustClient(t, oldCA, "alice"), oldCA)
	cli := mustReloader(t, cliFiles.config())
	cliCfg := cli.ClientConfigFor("127.0.0.1")
	cliCfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	for i := range 2 {
		cs, cerr, serr := handshake(t, srv, cliCfg, "127.0.0.1")
		if cerr != nil || serr != nil || i == 1 && !cs.DidResume {
			t.Fatalf("before rotation: client %v, server %v, resumed %v", cerr, serr, cs.DidResume)
		}
	}
	cliFiles.write(t, mustClient(t, newCA, "alice"), newCA)
	if err := cli.Reload(); err != nil {
		t.Fatal(err)
	}
	cs, cerr, _ := handshake(t, srv, cliCfg, "127.0.0.1")
	if cerr == nil || !strings.Contains(cerr.Error(), "unknown authority") {
		t.Fatalf("client after rotation: %v (resumed %v), want the old server refused", cerr, cs.DidResume)
	}
}
