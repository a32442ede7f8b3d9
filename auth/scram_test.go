package auth

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// TestSCRAMServerRFC7677 runs the exchange of RFC 7677 section 3
// (SCRAM-SHA-256, user "user", password "pencil"): the server's messages
// must be the RFC's bytes, and a proof off by one bit must be refused.
func TestSCRAMServerRFC7677(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	cred, err := SCRAMCredentialFromSalted(SCRAMSHA256, "user", "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	const (
		clientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
		snonce      = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
		serverFirst = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
		clientFinal = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
		serverFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
	)
	run := func(final string) (string, error) {
		s := NewSCRAMServer(SCRAMSHA256)
		user, err := s.ClientFirst([]byte(clientFirst), snonce)
		if err != nil || user != "user" {
			t.Fatalf("client-first: %q, %v", user, err)
		}
		if got := string(s.ServerFirst(cred)); got != serverFirst {
			t.Fatalf("server-first %q, want %q", got, serverFirst)
		}
		out, err := s.ClientFinal([]byte(final))
		return string(out), err
	}
	if got, err := run(clientFinal); err != nil || got != serverFinal {
		t.Fatalf("server-final %q, %v; want %q", got, err, serverFinal)
	}
	bad := strings.Replace(clientFinal, "p=dHzb", "p=dHzc", 1)
	if _, err := run(bad); !errors.Is(err, ErrSCRAMProof) {
		t.Fatalf("a wrong proof: %v; want ErrSCRAMProof", err)
	}
	if !cred.CheckPassword("pencil") || cred.CheckPassword("pencil2") {
		t.Fatal("CheckPassword")
	}
}

// TestSCRAMClientFirstRefusals: channel binding, another authorization
// identity, delegation tokens and malformed messages are refused.
func TestSCRAMClientFirstRefusals(t *testing.T) {
	for _, m := range []string{
		"p=tls-unique,,n=user,r=abc",
		"n,a=other,n=user,r=abc",
		"n,,n=user,r=abc,tokenauth=true",
		"n,,r=abc",
		"n,,n=user",
		"n,,n=us=er,r=abc",
		"garbage",
	} {
		if _, err := NewSCRAMServer(SCRAMSHA512).ClientFirst([]byte(m), "x"); !errors.Is(err, ErrInvalidSCRAM) {
			t.Errorf("%q: %v; want ErrInvalidSCRAM", m, err)
		}
	}
	if u, err := NewSCRAMServer(SCRAMSHA512).ClientFirst([]byte("n,a=a=3Db,n=a=3Db,r=abc"), "x"); err != nil || u != "a=b" {
		t.Errorf("escaped user: %q, %v", u, err)
	}
}

// TestSCRAMCredentialValidate refuses what a replica must not store.
func TestSCRAMCredentialValidate(t *testing.T) {
	good, err := SCRAMCredentialFromSalted(SCRAMSHA512, "alice", "pw", []byte("salt"), 4096)
	if err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*SCRAMCredential){
		"few iterations":  func(c *SCRAMCredential) { c.Iterations = 4095 },
		"many iterations": func(c *SCRAMCredential) { c.Iterations = 16385 },
		"no salt":         func(c *SCRAMCredential) { c.Salt = nil },
		"short key":       func(c *SCRAMCredential) { c.StoredKey = c.StoredKey[:32] },
		"mechanism":       func(c *SCRAMCredential) { c.Mechanism = "SCRAM-SHA-1" },
		"user":            func(c *SCRAMCredential) { c.User = "a,b" },
	} {
		c := good
		mutate(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidSCRAM) {
			t.Errorf("%s: %v; want ErrInvalidSCRAM", name, err)
		}
	}
}
