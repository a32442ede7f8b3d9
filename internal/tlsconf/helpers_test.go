package tlsconf

import (
	"crypto/tls"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// now is the tests' reference time; certificates are valid around it.
var now = time.Now().Truncate(time.Second)

func mustCA(t *testing.T, name string) *KeyPair {
	t.Helper()
	ca, err := NewCA(name, now.Add(-time.Hour), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func mustNode(t *testing.T, ca *KeyPair, id string) *KeyPair {
	t.Helper()
	kp, err := ca.IssueNode(id, []string{"127.0.0.1", "localhost"}, now.Add(-time.Hour), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

func mustClient(t *testing.T, ca *KeyPair, name string) *KeyPair {
	t.Helper()
	kp, err := ca.IssueClient(name, now.Add(-time.Hour), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// files are one Reloader's files in a temporary directory.
type files struct {
	dir           string
	cert, key, ca string
	caFiles       []string
}

func newFiles(t *testing.T) files {
	t.Helper()
	dir := t.TempDir()
	f := files{dir: dir, cert: filepath.Join(dir, "x.crt"), key: filepath.Join(dir, "x.key"), ca: filepath.Join(dir, "ca.crt")}
	f.caFiles = []string{f.ca}
	return f
}

// write replaces the files' content: kp's certificate and key, and the
// certificates of cas as the bundle.
func (f files) write(t *testing.T, kp *KeyPair, cas ...*KeyPair) {
	t.Helper()
	writeFile(t, f.cert, kp.CertPEM)
	writeFile(t, f.key, kp.KeyPEM)
	var bundle []byte
	for _, ca := range cas {
		bundle = append(bundle, ca.CertPEM...)
	}
	writeFile(t, f.ca, bundle)
}

// writeFile replaces name by a rename, as a careful operator (or a
// certificate manager) does.
func writeFile(t *testing.T, name string, data []byte) {
	t.Helper()
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, name); err != nil {
		t.Fatal(err)
	}
}

func (f files) config() Config {
	return Config{CertFile: f.cert, KeyFile: f.key, CAFiles: f.caFiles}
}

func mustReloader(t *testing.T, cfg Config) *Reloader {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// handshake runs a TLS handshake between srv and cli over loopback TCP,
// then one byte from server to client: under TLS 1.3 a client learns that
// the server refused its certificate only when it reads. It returns the
// client's view of the connection and each side's error.
func handshake(t *testing.T, srv, cli *tls.Config, serverName string) (tls.ConnectionState, error, error) {
	t.Helper()
	cli = cli.Clone()
	cli.ServerName = serverName
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	deadline := time.Now().Add(10 * time.Second)
	srvDone := make(chan error, 1)
	go func() {
		a, err := ln.Accept()
		if err != nil {
			srvDone <- err
			return
		}
		defer a.Close()
		a.SetDeadline(deadline)
		s := tls.Server(a, srv)
		err = s.Handshake()
		if err == nil {
			_, err = s.Write([]byte{1})
		}
		srvDone <- err
	}()
	b, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.SetDeadline(deadline)
	c := tls.Client(b, cli)
	err = c.Handshake()
	if err == nil {
		var one [1]byte
		_, err = io.ReadFull(c, one[:])
	}
	cs := c.ConnectionState()
	b.Close()
	return cs, err, <-srvDone
}
