package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"strings"
	"testing"
)

func noEnv(string) string { return "" }

// TestLoopbackRule: a node serves a non-loopback address only over TLS
// with --auth required (and peer TLS for Raft), or with
// --insecure-allow-plaintext and a warning; each address flag trips the
// rule on its own, and the refusal names the flags.
func TestLoopbackRule(t *testing.T) {
	tlsAPI := []string{"--tls-cert", "n1.crt", "--tls-key", "n1.key"}
	mtls := append(tlsAPI[:4:4], "--tls-client-ca", "ca.crt")
	args := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	authReq := []string{"--auth", "required"}
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		err     []string // all in the error; nil: starts
		notErr  string   // not in the error
		warning string   // in the warning; "": none
	}{
		{name: "defaults are loopback", args: nil},
		{name: "localhost and ::1 are loopback", args: []string{"--listen", "localhost:7070", "--advertise", "[::1]:7070", "--raft-addr", "127.0.0.2:7071", "--raft-advertise", "localhost:7071"}},
		{name: "auth required in plaintext on loopback", args: authReq},
		{name: "listen on every interface", args: []string{"--listen", "0.0.0.0:7070"},
			err: []string{"--listen 0.0.0.0:7070", "--tls-cert", "--tls-key", "--auth required", "--insecure-allow-plaintext"}},
		{name: "listen without a host", args: []string{"--listen", ":7070"}, err: []string{"--listen :7070"}},
		{name: "listen on ::", args: []string{"--listen", "[::]:7070"}, err: []string{"--listen [::]:7070"}},
		{name: "advertise a LAN address", args: []string{"--advertise", "10.0.0.5:7070"}, err: []string{"--advertise 10.0.0.5:7070", "--tls-cert"}},
		{name: "advertise a host name", args: []string{"--advertise", "db1.example:7070"}, err: []string{"--advertise db1.example:7070"}},
		{name: "raft on every interface", args: []string{"--raft-addr", "0.0.0.0:7071"},
			err: []string{"--raft-addr 0.0.0.0:7071", "--peer-tls-cert", "--peer-tls-ca"}, notErr: "--auth required"},
		{name: "raft advertised on the LAN", args: []string{"--raft-advertise", "10.0.0.5:7071"}, err: []string{"--raft-advertise 10.0.0.5:7071", "peer TLS"}},
		{name: "peer listener on loopback", args: []string{"--peer-listen", "127.0.0.1:7072"}},
		{name: "peer listener on every interface", args: []string{"--peer-listen", "0.0.0.0:7072"},
			err: []string{"--peer-listen 0.0.0.0:7072", "peer TLS"}, notErr: "--auth required"},
		{name: "peer listener advertised on the LAN", args: []string{"--peer-listen", "127.0.0.1:7072", "--peer-advertise", "10.0.0.5:7072"},
			err: []string{"--peer-advertise 10.0.0.5:7072", "peer TLS"}},
		{name: "peer listener exposed, peer TLS", args: args([]string{"--peer-listen", "0.0.0.0:7072", "--peer-advertise", "10.0.0.5:7072"}, mtls)},
		{name: "TLS without auth", args: args([]string{"--listen", "0.0.0.0:7070"}, tlsAPI),
			err: []string{"--listen 0.0.0.0:7070", "--auth required"}, notErr: "--tls-key"},
		{name: "auth without TLS", args: args([]string{"--listen", "0.0.0.0:7070"}, authReq),
			err: []string{"TLS on the client API"}, notErr: "--auth required"},
		{name: "TLS and auth", args: args([]string{"--listen", "0.0.0.0:7070", "--advertise", "10.0.0.5:7070"}, tlsAPI, authReq)},
		{name: "raft exposed, API TLS without a CA", args: args([]string{"--listen", "0.0.0.0:7070", "--raft-addr", "0.0.0.0:7071"}, tlsAPI, authReq),
			err: []string{"--raft-addr 0.0.0.0:7071", "peer TLS"}, notErr: "--listen"},
		{name: "everything exposed, peer TLS from the API's", args: args([]string{"--listen", "0.0.0.0:7070", "--raft-addr", "0.0.0.0:7071", "--raft-advertise", "10.0.0.5:7071"}, mtls, authReq)},
		{name: "everything exposed, explicit peer TLS", args: args([]string{"--listen", "0.0.0.0:7070", "--raft-addr", "0.0.0.0:7071"}, tlsAPI, authReq,
			[]string{"--peer-tls-cert", "p.crt", "--peer-tls-key", "p.key", "--peer-tls-ca", "cluster.crt"})},
		{name: "plaintext allowed, with a warning", args: []string{"--listen", "0.0.0.0:7070", "--raft-addr", "0.0.0.0:7071", "--insecure-allow-plaintext"},
			warning: "--listen 0.0.0.0:7070 not on loopback: it needs TLS on the client API (--tls-cert, --tls-key) and --auth required; --raft-addr 0.0.0.0:7071 not on loopback: it needs peer TLS"},
		{name: "plaintext allowed from the environment", args: []string{"--advertise", "10.0.0.5:7070"}, env: map[string]string{"LOGD_INSECURE_ALLOW_PLAINTEXT": "true"},
			warning: "--advertise 10.0.0.5:7070"},
		{name: "listen from the environment", env: map[string]string{"LOGD_LISTEN": "0.0.0.0:7070"}, err: []string{"--listen 0.0.0.0:7070"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseFlags(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
			if tc.err == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if tc.warning == "" && c.plaintextWarning != "" || !strings.Contains(c.plaintextWarning, tc.warning) {
					t.Fatalf("warning %q, want %q", c.plaintextWarning, tc.warning)
				}
				return
			}
			if err == nil {
				t.Fatal("started; want a refusal")
			}
			for _, want := range tc.err {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if tc.notErr != "" && strings.Contains(err.Error(), tc.notErr) {
				t.Errorf("error %q names %q, which is not missing", err, tc.notErr)
			}
		})
	}
}

// TestTLSFlags: the TLS flags' own checks, environment names and peer
// defaults.
func TestTLSFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		err  string
		want tlsConfig // compared on the file names
	}{
		{name: "none", want: tlsConfig{}},
		{name: "API TLS only: plaintext peers", args: []string{"--tls-cert", "a.crt", "--tls-key", "a.key"},
			want: tlsConfig{cert: "a.crt", key: "a.key"}},
		{name: "mTLS: peers default to the API's", args: []string{"--tls-cert", "a.crt", "--tls-key", "a.key", "--tls-client-ca", "ca.crt"},
			want: tlsConfig{cert: "a.crt", key: "a.key", clientCA: "ca.crt", peerCert: "a.crt", peerKey: "a.key", peerCA: "ca.crt"}},
		{name: "a peer CA of its own", args: []string{"--tls-cert", "a.crt", "--tls-key", "a.key", "--peer-tls-ca", "cluster.crt"},
			want: tlsConfig{cert: "a.crt", key: "a.key", peerCert: "a.crt", peerKey: "a.key", peerCA: "cluster.crt"}},
		{name: "from the environment", env: map[string]string{"LOGD_TLS_CERT": "e.crt", "LOGD_TLS_KEY": "e.key", "LOGD_PEER_TLS_CERT": "p.crt", "LOGD_PEER_TLS_KEY": "p.key", "LOGD_PEER_TLS_CA": "c.crt"},
			want: tlsConfig{cert: "e.crt", key: "e.key", peerCert: "p.crt", peerKey: "p.key", peerCA: "c.crt"}},
		{name: "certificate without key", args: []string{"--tls-cert", "a.crt"}, err: "--tls-cert and --tls-key"},
		{name: "key without certificate", args: []string{"--tls-key", "a.key"}, err: "--tls-cert and --tls-key"},
		{name: "client CA without TLS", args: []string{"--tls-client-ca", "ca.crt"}, err: "--tls-client-ca needs"},
		{name: "peer certificate alone", args: []string{"--peer-tls-cert", "p.crt"}, err: "missing --peer-tls-key (or --tls-key), --peer-tls-ca"},
		{name: "peer TLS without API TLS", args: []string{"--peer-tls-cert", "p.crt", "--peer-tls-key", "p.key", "--peer-tls-ca", "c.crt"}, err: "client API on TLS"},
		{name: "bad reload interval", args: []string{"--tls-reload-interval", "-1s"}, err: "--tls-reload-interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseFlags(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("%v, want an error with %q", err, tc.err)
			case tc.err != "":
				return
			case err != nil:
				t.Fatal(err)
			}
			got := c.tls
			got.reloadInterval, got.insecurePlaintext = 0, false
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	c, err := parseFlags(nil, noEnv, io.Discard)
	if err != nil || c.tls.reloadInterval != defaultTLSReloadInterval {
		t.Fatalf("default reload interval %v, %v", c.tls.reloadInterval, err)
	}
}

// TestAPIClientAuth: the client API asks for client certificates as
// docs/security.md says.
func TestAPIClientAuth(t *testing.T) {
	for _, tc := range []struct {
		t    tlsConfig
		want tls.ClientAuthType
	}{
		{tlsConfig{cert: "a"}, tls.NoClientCert},
		{tlsConfig{cert: "a", peerCert: "a", peerCA: "c"}, tls.VerifyClientCertIfGiven},
		{tlsConfig{cert: "a", clientCA: "c", peerCert: "a", peerCA: "c"}, tls.RequireAndVerifyClientCert},
	} {
		if got := apiClientAuthFor(tc.t); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.t, got, tc.want)
		}
	}
}

// TestInsecurePlaintextWarns: --insecure-allow-plaintext is logged as a
// warning before anything else happens (here the start then fails on a
// missing certificate, so no node runs).
func TestInsecurePlaintextWarns(t *testing.T) {
	var stderr bytes.Buffer
	err := runArgs(context.Background(), []string{"--advertise", "10.0.0.5:7070", "--tls-cert", "/nonexistent/n1.crt", "--tls-key", "/nonexistent/n1.key", "--insecure-allow-plaintext",
		"--data-dir", t.TempDir()}, noEnv, &stderr)
	if err == nil || !strings.Contains(err.Error(), "n1.crt") {
		t.Fatalf("run: %v, want the missing certificate", err)
	}
	if out := stderr.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "INSECURE") || !strings.Contains(out, "--advertise 10.0.0.5:7070 not on loopback: it needs --auth required") {
		t.Fatalf("no warning naming the exposed address in:\n%s", out)
	}
}
