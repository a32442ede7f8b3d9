package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/auth/certid"
	"github.com/logd-dev/logd/internal/tlsconf"
)

var certNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// certCmd runs logd cert with args at certNow and returns its stdout.
func certCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout bytes.Buffer
	err := runCert(args, &stdout, io.Discard, certNow)
	return stdout.String(), err
}

func mustCertCmd(t *testing.T, args ...string) string {
	t.Helper()
	out, err := certCmd(t, args...)
	if err != nil {
		t.Fatalf("logd cert %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// issueNow runs logd cert with args at the current time, for
// certificates a node loads.
func issueNow(t *testing.T, args ...string) {
	t.Helper()
	if err := runCert(args, io.Discard, io.Discard, time.Now()); err != nil {
		t.Fatalf("logd cert %s: %v", strings.Join(args, " "), err)
	}
}

func readKeyPair(t *testing.T, dir, base string) *tlsconf.KeyPair {
	t.Helper()
	certPEM, err := os.ReadFile(filepath.Join(dir, base+".crt"))
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, base+".key"))
	if err != nil {
		t.Fatal(err)
	}
	kp, err := tlsconf.ParseKeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

func fileMode(t *testing.T, name string) os.FileMode {
	t.Helper()
	st, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// TestCertCommand: logd cert ca, node and client write what
// docs/security.md says, with private keys readable by their owner only.
func TestCertCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	out := mustCertCmd(t, "ca", "--dir", dir)
	for _, want := range []string{"certificate  " + filepath.Join(dir, "ca.crt"), "key          " + filepath.Join(dir, "ca.key"), "CN=logd development CA"} {
		if !strings.Contains(out, want) {
			t.Errorf("ca output lacks %q:\n%s", want, out)
		}
	}
	ca := readKeyPair(t, dir, "ca")
	if !ca.Cert.IsCA || !ca.Cert.NotBefore.Equal(certNow.Add(-certBackdate)) || !ca.Cert.NotAfter.Equal(certNow.Add(-certBackdate).Add(defaultCAValidFor)) {
		t.Fatalf("CA: IsCA %v, valid %v to %v", ca.Cert.IsCA, ca.Cert.NotBefore, ca.Cert.NotAfter)
	}

	mustCertCmd(t, "node", "--dir", dir, "--id", "n1", "--hosts", "127.0.0.1,localhost,db1.example")
	node := readKeyPair(t, dir, "n1")
	if id, ok := certid.NodeID(node.Cert); !ok || id != "n1" {
		t.Fatalf("node id %q, %v", id, ok)
	}
	if err := node.Cert.CheckSignatureFrom(ca.Cert); err != nil {
		t.Fatalf("node certificate not signed by the CA: %v", err)
	}
	if !slices.Equal(node.Cert.DNSNames, []string{"localhost", "db1.example"}) || len(node.Cert.IPAddresses) != 1 || node.Cert.IPAddresses[0].String() != "127.0.0.1" {
		t.Fatalf("node SANs: %v %v", node.Cert.DNSNames, node.Cert.IPAddresses)
	}
	if got := node.Cert.NotAfter.Sub(node.Cert.NotBefore); got != defaultLeafValidFor {
		t.Fatalf("node validity %v", got)
	}

	out = mustCertCmd(t, "client", "--dir", dir, "--name", "alice", "--valid-for", "30d", "--output", "json")
	var js certOutput
	if err := json.Unmarshal([]byte(out), &js); err != nil {
		t.Fatalf("json output: %v\n%s", err, out)
	}
	if js.Identity != "logd://user/alice" || js.Key != filepath.Join(dir, "alice.key") || js.NotAfter.Sub(js.NotBefore) != 30*24*time.Hour || js.CA {
		t.Fatalf("json output: %+v", js)
	}
	client := readKeyPair(t, dir, "alice")
	if p, ok := certid.Principal(client.Cert); !ok || p.String() != "User:alice" || client.Cert.Subject.CommonName != "alice" || client.Cert.CheckSignatureFrom(ca.Cert) != nil {
		t.Fatalf("client certificate: principal %v, CN %q", p, client.Cert.Subject.CommonName)
	}

	for _, base := range []string{"ca", "n1", "alice"} {
		if m := fileMode(t, filepath.Join(dir, base+".key")); m != 0o600 {
			t.Errorf("%s.key mode %o, want 600", base, m)
		}
		if m := fileMode(t, filepath.Join(dir, base+".crt")); m != 0o644 {
			t.Errorf("%s.crt mode %o, want 644", base, m)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 6 {
		t.Fatalf("%d files in %s, want 6 (no temporary files left)", len(entries), dir)
	}

	// Existing files stay unless --force.
	before, _ := os.ReadFile(filepath.Join(dir, "n1.key"))
	if _, err := certCmd(t, "node", "--dir", dir, "--id", "n1"); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("overwrite without --force: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "n1.key")); !bytes.Equal(before, after) {
		t.Fatal("a refused overwrite changed the key")
	}
	if _, err := certCmd(t, "ca", "--dir", dir); err == nil {
		t.Fatal("ca overwritten without --force")
	}
	mustCertCmd(t, "node", "--dir", dir, "--id", "n1", "--force")
	if after, _ := os.ReadFile(filepath.Join(dir, "n1.key")); bytes.Equal(before, after) {
		t.Fatal("--force did not replace the key")
	}
	if renewed := readKeyPair(t, dir, "n1"); renewed.Cert.CheckSignatureFrom(ca.Cert) != nil {
		t.Fatal("the replaced certificate is not the CA's")
	}
}

// TestCertCommandRefusals: bad input is refused with the flag's name and
// writes nothing.
func TestCertCommandRefusals(t *testing.T) {
	dir := t.TempDir()
	noCA := filepath.Join(dir, "empty")
	withCA := filepath.Join(dir, "ca")
	mustCertCmd(t, "ca", "--dir", withCA)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{name: "no subcommand", args: nil, want: "subcommand"},
		{name: "unknown subcommand", args: []string{"server"}, want: `unknown subcommand "server"`},
		{name: "node without a CA", args: []string{"node", "--dir", noCA, "--id", "n1"}, want: "logd cert ca --dir"},
		{name: "node without an id", args: []string{"node", "--dir", withCA}, want: "--id"},
		{name: "node id with a slash", args: []string{"node", "--dir", withCA, "--id", "../n1"}, want: "--id"},
		{name: "client named ca", args: []string{"client", "--dir", withCA, "--name", "ca"}, want: "CA's files"},
		{name: "client without a name", args: []string{"client", "--dir", withCA}, want: "--name"},
		{name: "bad validity", args: []string{"client", "--dir", withCA, "--name", "bob", "--valid-for", "-1h"}, want: "--valid-for"},
		{name: "bad days", args: []string{"ca", "--dir", noCA, "--valid-for", "xd"}, want: "--valid-for"},
		{name: "bad output", args: []string{"ca", "--dir", noCA, "--output", "yaml"}, want: "--output"},
		{name: "extra argument", args: []string{"ca", "--dir", noCA, "extra"}, want: "unexpected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := certCmd(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want an error with %q", err, tc.want)
			}
		})
	}
	if _, err := os.Stat(noCA); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("refused commands created %s: %v", noCA, err)
	}
	if entries, _ := os.ReadDir(withCA); len(entries) != 2 {
		t.Fatalf("refused commands wrote into %s: %d files", withCA, len(entries))
	}
	if _, err := certCmd(t, "node", "-h"); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
}
