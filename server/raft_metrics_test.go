package server_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logd-dev/logd/auth/certid"
	"github.com/logd-dev/logd/internal/testcerts"
	"github.com/logd-dev/logd/peer"
	"github.com/logd-dev/logd/replication/replicationtest"
	"github.com/logd-dev/logd/server"
)

// raftRefused returns logd_raft_connections_refused_total{reason} as reg
// gathers it.
func raftRefused(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "logd_raft_connections_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no logd_raft_connections_refused_total{reason=%q}", reason)
	return 0
}

// TestRaftPortMetrics: strangers refused by a node's Raft port under peer
// TLS are counted by reason in /metrics, and a member's connections as
// admitted and open.
func TestRaftPortMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ca, other := testcerts.NewCA(t, "cluster"), testcerts.NewCA(t, "other")
	self := ca.Node(t, "n1")
	// A real Raft port under peer TLS, for strangers to knock on.
	n := replicationtest.Start(t, replicationtest.Options{
		PeerTLS: &peer.TLS{Server: ca.ServerConfig(self), Client: ca.ClientConfig(self), NodeID: certid.NodeID},
	})
	reg := prometheus.NewRegistry()
	server.New(server.Options{Backend: n.Backend, Registry: reg})
	raftAddr := n.Status().Members[0].Address

	// knock dials the Raft port with cert (none: the zero value) and
	// reads until the port closes the connection.
	knock := func(cert tls.Certificate) {
		cfg := ca.ClientConfig(cert)
		cfg.InsecureSkipVerify = true // a stranger need not trust the node
		d := net.Dialer{Timeout: 5 * time.Second}
		c, err := tls.DialWithDialer(&d, "tcp", raftAddr, cfg)
		if err != nil {
			return // refused in the handshake itself (TLS 1.2)
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		io.Copy(io.Discard, c)
	}
	for _, tc := range []struct {
		name, reason string
		knock        func()
	}{
		{"a client certificate of the cluster CA", "not_node", func() { knock(ca.Client(t, "mallory")) }},
		{"a node certificate of another CA", "handshake", func() { knock(other.Node(t, "n2")) }},
		{"a node of the cluster CA that is not a member", "not_member", func() { knock(ca.Node(t, "n9")) }},
		{"plaintext", "handshake", func() {
			c, err := net.Dial("tcp", raftAddr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Write([]byte("not TLS\r\n\r\n"))
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			io.Copy(io.Discard, c)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := raftRefused(t, reg, tc.reason)
			tc.knock()
			for raftRefused(t, reg, tc.reason) != before+1 {
				select {
				case <-ctx.Done():
					t.Fatalf("refused_total{reason=%q} stays %v", tc.reason, before)
				case <-time.After(5 * time.Millisecond):
				}
			}
		})
	}
	if got := raftRefused(t, reg, "cap"); got != 0 {
		t.Errorf("refused for the cap: %v, want 0", got)
	}
}
