package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/auth/certid"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/internal/testcerts"
	"github.com/logd-dev/logd/peer"
)

// tlsFor is the peer TLS of a node that presents cert and trusts ca.
func tlsFor(ca *testcerts.CA, cert tls.Certificate) *peer.TLS {
	return &peer.TLS{Server: ca.ServerConfig(cert), Client: ca.ClientConfig(cert), NodeID: certid.NodeID}
}

func testLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// waitCond polls cond every 5 ms until it holds or ctx ends.
func waitCond(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// startStream starts the Raft port of node n1 on a loopback address with
// peer TLS p (nil: plaintext) whose group 0's member check is member, and
// returns it with the connections group 0 admits; it closes the port at
// the test's end.
func startStream(t *testing.T, p *peer.TLS, maxConns int, member func(string) bool) (*Port, <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewPort(ln, nil, p, "n1", maxConns, testLogger())
	s.Group(0).Attach(member)
	s.Start()
	t.Cleanup(func() { s.Close() })
	return s, accepted(s.Group(0))
}

// accepted returns the connections l accepts, until its port closes.
func accepted(l *Layer) <-chan net.Conn {
	admitted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			admitted <- c
		}
	}()
	return admitted
}

// legacyRPC is the first byte of a Raft connection of the previous
// framing (an AppendEntries).
var legacyRPC = []byte{0}

// closedByPeer waits until the other side closed c.
func closedByPeer(t *testing.T, what string, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("%s: read %v, want the connection closed", what, err)
	}
}

// presenting is a GetClientCertificate that presents cert whatever CAs
// the server names (by default, Go's client sends no certificate that
// none of them issued).
func presenting(cert tls.Certificate) func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
}

// TestStreamRefuses: under TLS the Raft port admits a node certificate of
// the cluster CA whose node its member check admits, and closes and
// counts, by reason, anything else.
func TestStreamRefuses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ca, other := testcerts.NewCA(t, "cluster"), testcerts.NewCA(t, "other")
	s, admitted := startStream(t, tlsFor(ca, ca.Node(t, "n1")), 16, func(id string) bool { return id == "n2" })
	addr := s.Addr().String()
	for _, tc := range []struct {
		name string
		cert *tls.Certificate // nil: plaintext
		// counted is the counter the connection moves; nil: admitted.
		counted func(backend.RaftConnStats) uint64
	}{
		{name: "plaintext", counted: func(s backend.RaftConnStats) uint64 { return s.RefusedHandshake }},
		{name: "a node certificate of another CA", cert: ptr(other.Node(t, "n2")), counted: func(s backend.RaftConnStats) uint64 { return s.RefusedHandshake }},
		{name: "a client certificate of the cluster CA", cert: ptr(ca.Client(t, "mallory")), counted: func(s backend.RaftConnStats) uint64 { return s.RefusedNotNode }},
		{name: "a node certificate of a non-member", cert: ptr(ca.Node(t, "n9")), counted: func(s backend.RaftConnStats) uint64 { return s.RefusedNotMember }},
		{name: "a member", cert: ptr(ca.Node(t, "n2"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.Stats()
			raw, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			c := raw
			if tc.cert == nil {
				raw.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
			} else {
				// The stranger trusts any server: only its own
				// certificate is under test. Under TLS 1.3 the client's
				// side of the handshake may end before the server
				// refuses: the refusal shows at the next read.
				tlsConn := tls.Client(raw, &tls.Config{GetClientCertificate: presenting(*tc.cert), InsecureSkipVerify: true})
				if err := tlsConn.HandshakeContext(ctx); err != nil && tc.counted == nil {
					t.Fatalf("a member's handshake: %v", err)
				}
				c = tlsConn
				c.Write(legacyRPC)
			}
			if tc.counted == nil {
				select {
				case a := <-admitted:
					a.Close()
				case <-ctx.Done():
					t.Fatal("a member's connection was not admitted")
				}
				// Accept may return before the admission is counted.
				waitCond(t, ctx, "the admission counted", func() bool { return s.Stats().Admitted == before.Admitted+1 })
				return
			}
			// A refusal is counted before the connection is closed.
			waitCond(t, ctx, "the refusal counted", func() bool { return tc.counted(s.Stats()) > tc.counted(before) })
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			var rerr error
			for rerr == nil {
				_, rerr = c.Read(make([]byte, 64))
			}
			if errors.Is(rerr, os.ErrDeadlineExceeded) {
				t.Errorf("the refused connection is open")
			}
			if st := s.Stats(); st.Admitted != before.Admitted || tc.counted(st) != tc.counted(before)+1 {
				t.Errorf("stats %+v, were %+v: want one refusal of the kind, none admitted", st, before)
			}
		})
	}
}

// TestStreamPrune: Prune closes the admitted connections of a node the
// member check no longer admits, and keeps the others.
func TestStreamPrune(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ca := testcerts.NewCA(t, "cluster")
	var mu sync.Mutex
	members := map[string]bool{"n2": true, "n3": true}
	s, admitted := startStream(t, tlsFor(ca, ca.Node(t, "n1")), 16, func(id string) bool {
		mu.Lock()
		defer mu.Unlock()
		return members[id]
	})
	dial := func(id string) net.Conn {
		t.Helper()
		raw, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c, _, err := tlsFor(ca, ca.Node(t, id)).Handshake(ctx, raw, s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.Write(legacyRPC)
		select {
		case <-admitted:
		case <-ctx.Done():
			t.Fatalf("%s's connection was not admitted", id)
		}
		return c
	}
	kept, removed := dial("n2"), dial("n3")
	mu.Lock()
	delete(members, "n3")
	mu.Unlock()
	s.Prune()
	closedByPeer(t, "the removed node's connection", removed)
	kept.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := kept.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a member's connection: read %v, want it open", err)
	}
	if st := s.Stats(); st.Open != 1 {
		t.Errorf("stats %+v: want the member's connection open only", st)
	}
}

func ptr[T any](v T) *T { return &v }

// TestStreamCap: the Raft port holds at most its cap of connections,
// with or without TLS, and closes more at once; under TLS, strangers that
// never finish their handshake hold a slot only until its deadline, and
// do not hold up a member's connection meanwhile.
func TestStreamCap(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	for _, tc := range []struct {
		name string
		tls  bool
	}{{name: "plaintext"}, {name: "tls", tls: true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var ptls *peer.TLS
			if tc.tls {
				ptls = tlsFor(ca, ca.Node(t, "n1"))
			}
			const max = 3
			s := NewPort(ln, nil, ptls, "n1", max, testLogger())
			s.handshake = 500 * time.Millisecond
			s.Group(0).Attach(func(string) bool { return true })
			s.Start()
			defer s.Close()
			admitted := accepted(s.Group(0))
			addr := ln.Addr().String()
			dialRaw := func() net.Conn {
				t.Helper()
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return c
			}
			// A Raft connection of the previous framing, plaintext.
			dialRaft := func() net.Conn {
				t.Helper()
				c := dialRaw()
				c.Write(legacyRPC)
				return c
			}
			open := func(n int) func() bool { return func() bool { return s.Stats().Open == n } }

			if !tc.tls {
				for range max {
					dialRaft()
				}
				waitCond(t, ctx, "three admitted", func() bool { return s.Stats().Admitted == max })
				closedByPeer(t, "a fourth connection", dialRaw())
				if st := s.Stats(); st.RefusedCap != 1 || st.Admitted != max {
					t.Fatalf("stats %+v: want 1 refused by the cap, %d admitted", st, max)
				}
				// One closes: a new one takes its place.
				(<-admitted).Close()
				waitCond(t, ctx, "a slot free", open(max-1))
				dialRaft()
				waitCond(t, ctx, "the new one admitted", func() bool { return s.Stats().Admitted == max+1 })
				return
			}
			// Two strangers stall in their handshakes.
			s1, s2 := dialRaw(), dialRaw()
			waitCond(t, ctx, "two in their handshake", open(2))
			// A member still gets in.
			c, _, err := tlsFor(ca, ca.Node(t, "n2")).Handshake(ctx, dialRaw(), addr)
			if err != nil {
				t.Fatalf("member's handshake while strangers stall: %v", err)
			}
			defer c.Close()
			c.Write(legacyRPC)
			select {
			case <-admitted:
			case <-ctx.Done():
				t.Fatal("the member's connection was not admitted while strangers stalled")
			}
			closedByPeer(t, "a fourth connection", dialRaw())
			closedByPeer(t, "a stalled stranger", s1)
			closedByPeer(t, "a stalled stranger", s2)
			waitCond(t, ctx, "the strangers' slots freed", open(1))
			// A slot is freed before its refusal is counted: wait for the count.
			waitCond(t, ctx, "2 refused by their handshake", func() bool { return s.Stats().RefusedHandshake == 2 })
			if st := s.Stats(); st.RefusedCap != 1 || st.RefusedHandshake != 2 || st.Admitted != 1 {
				t.Fatalf("stats %+v: want 1 refused by the cap, 2 by their handshake, 1 admitted", st)
			}
		})
	}
}
