package main

import (
	"io"
	"strings"
	"testing"

	"github.com/logd-dev/logd/server"
)

// TestPeerListenFlags: --peer-listen and --peer-advertise (and their
// LOGD_* names); an advertised address needs the listener, and a listener
// on every interface needs an address peers can call. Binding takes the
// peer listener's connection cap out of the client cap.
func TestPeerListenFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		err  string
		want peerListenConfig
	}{
		{name: "off by default"},
		{name: "listen", args: []string{"--peer-listen", "127.0.0.1:7072"}, want: peerListenConfig{listen: "127.0.0.1:7072"}},
		{name: "from the environment", env: map[string]string{"LOGD_PEER_LISTEN": "127.0.0.1:7072", "LOGD_PEER_ADVERTISE": "localhost:7072"},
			want: peerListenConfig{listen: "127.0.0.1:7072", advertise: "localhost:7072"}},
		{name: "advertise without listen", args: []string{"--peer-advertise", "127.0.0.1:7072"}, err: "--peer-advertise needs --peer-listen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseFlags(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("%v, want an error with %q", err, tc.err)
			case tc.err != "":
			case err != nil:
				t.Fatal(err)
			case c.peer != tc.want:
				t.Fatalf("peer listener %+v, want %+v", c.peer, tc.want)
			}
		})
	}

	p := peerListenConfig{listen: "127.0.0.1:0"}
	ln, peer, client, err := p.bind(server.ConnLimits{Max: 2000, MaxPerAddr: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if p.advertise != ln.Addr().String() {
		t.Errorf("advertise %q, want the bound address %s", p.advertise, ln.Addr())
	}
	if peer.Max != maxPeerConns || client.Max != 2000-maxPeerConns || client.MaxPerAddr != 100 {
		t.Errorf("caps: peer %+v, client %+v; want %d taken from the client cap", peer, client, maxPeerConns)
	}
	all := peerListenConfig{listen: "0.0.0.0:0"}
	if ln, _, _, err := all.bind(server.ConnLimits{}); err == nil || !strings.Contains(err.Error(), "--peer-advertise") {
		if ln != nil {
			ln.Close()
		}
		t.Errorf("every interface without --peer-advertise: %v", err)
	}
}
