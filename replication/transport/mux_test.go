package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/internal/testcerts"
	"github.com/logd-dev/logd/peer"
)

// newPort starts the Raft port of node id on a loopback address, with
// secret (nil: none) and peer TLS p (nil: plaintext), its groups attached
// with member; it closes at the test's end.
func newPort(t *testing.T, id string, secret []byte, p *peer.TLS, member func(string) bool, groups ...uint64) *Port {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := NewPort(ln, nil, p, id, 64, testLogger())
	port.SetSecret(secret, true)
	for _, g := range groups {
		port.Group(g).Attach(member)
	}
	port.Start()
	t.Cleanup(func() { port.Close() })
	return port
}

func anyone(string) bool { return true }

var (
	secretA = bytes.Repeat([]byte{'a'}, 32)
	secretB = bytes.Repeat([]byte{'b'}, 32)
)

// roundTrip writes msg on c and reads it back from the accepted side.
func roundTrip(t *testing.T, ctx context.Context, c net.Conn, admitted <-chan net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write: %v", err)
	}
	var a net.Conn
	select {
	case a = <-admitted:
	case <-ctx.Done():
		t.Fatal("no stream admitted")
	}
	defer a.Close()
	got := make([]byte, len(msg))
	a.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(a, got); err != nil || string(got) != msg {
		t.Fatalf("read %q, %v; want %q", got, err, msg)
	}
}

// TestSessionCarriesGroups: streams of one session reach the layer of
// the group they name, over one connection; a stream naming a group of
// which the proven node is no member is refused.
func TestSessionCarriesGroups(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	server := newPort(t, "n1", secretA, nil, nil)
	server.Group(0).Attach(anyone)
	server.Group(7).Attach(func(id string) bool { return id == "n2" })
	server.Group(8).Attach(func(id string) bool { return id == "n3" })
	g0, g7, g8 := accepted(server.Group(0)), accepted(server.Group(7)), accepted(server.Group(8))
	client := newPort(t, "n2", secretA, nil, anyone, 0)
	addr := raft.ServerAddress(server.Addr().String())
	for i := range 3 {
		for _, g := range []struct {
			id       uint64
			admitted <-chan net.Conn
		}{{0, g0}, {7, g7}} {
			c, err := client.Group(g.id).Dial(addr, 5*time.Second)
			if err != nil {
				t.Fatalf("dial group %d: %v", g.id, err)
			}
			defer c.Close()
			roundTrip(t, ctx, c, g.admitted, "hello group "+string(rune('0'+i)))
		}
	}
	if st := server.Stats(); st.Open != 1 || st.Admitted != 6 || st.Sessions != 1 || st.Secret != backend.SecretRequired {
		t.Errorf("stats %+v: want 6 streams admitted over 1 connection and session, the secret required", st)
	}
	if st := client.Stats(); st.Sessions != 1 {
		t.Errorf("the dialing node's stats %+v: want 1 session", st)
	}
	client.SetSecret(secretA, false)
	if st := client.Stats(); st.Secret != backend.SecretHeld {
		t.Errorf("stats %+v: want the secret held, not required", st)
	}
	c, err := client.Group(8).Dial(addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial group 8: %v", err)
	}
	defer c.Close()
	closedByPeer(t, "a stream of a group the node is no member of", c)
	if st := server.Stats(); st.RefusedNotMember != 1 {
		t.Errorf("stats %+v: want the stream refused as a non-member's", st)
	}
	select {
	case <-g8:
		t.Error("group 8 admitted a non-member's stream")
	default:
	}
}

// TestSessionSecret: a node that holds the cluster secret takes a
// session only from a node that proves the same one, and dials only a
// node that proves it; two nodes without one run unproven.
func TestSessionSecret(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		serverKey, clientKey         []byte
		serverLenient, clientLenient bool
		// refused: the server counts a refusal; else the client refuses
		// the server, or (ok) all goes through.
		refused, ok bool
	}{
		{name: "same secret", serverKey: secretA, clientKey: secretA, ok: true},
		{name: "neither holds one", ok: true},
		{name: "client holds none", serverKey: secretA, refused: true},
		// The client finds the server's proof wrong first.
		{name: "client holds another", serverKey: secretA, clientKey: secretB},
		{name: "server holds none", clientKey: secretA},
		// A port that holds a secret without requiring it (an upgraded
		// cluster being handed one) takes unproven peers.
		{name: "lenient server, client holds none", serverKey: secretA, serverLenient: true, ok: true},
		{name: "lenient server, client holds another", serverKey: secretA, serverLenient: true, clientKey: secretB, clientLenient: true, ok: true},
		{name: "lenient client, server holds none", clientKey: secretA, clientLenient: true, ok: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			server := newPort(t, "n1", tc.serverKey, nil, anyone, 0)
			server.SetSecret(tc.serverKey, !tc.serverLenient)
			admitted := accepted(server.Group(0))
			client := newPort(t, "n2", tc.clientKey, nil, anyone, 0)
			client.SetSecret(tc.clientKey, !tc.clientLenient)
			c, err := client.Group(0).Dial(raft.ServerAddress(server.Addr().String()), 5*time.Second)
			if tc.ok {
				if err != nil {
					t.Fatalf("dial: %v", err)
				}
				defer c.Close()
				roundTrip(t, ctx, c, admitted, "append")
				return
			}
			if !errors.Is(err, ErrSecret) {
				t.Fatalf("dial: %v, want ErrSecret", err)
			}
			if tc.refused {
				waitCond(t, ctx, "the refusal counted", func() bool { return server.Stats().RefusedSecret == 1 })
			}
			if st := server.Stats(); st.Admitted != 0 {
				t.Errorf("stats %+v: want nothing admitted", st)
			}
		})
	}
}

// TestSessionIdentityUnderTLS: under peer TLS a hello naming another node
// than the certificate is refused.
func TestSessionIdentityUnderTLS(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	server := newPort(t, "n1", secretA, tlsFor(ca, ca.Node(t, "n1")), anyone, 0)
	// n3's certificate, n2's name in the hello.
	client := newPort(t, "n2", secretA, tlsFor(ca, ca.Node(t, "n3")), anyone, 0)
	_, err := client.Group(0).Dial(raft.ServerAddress(server.Addr().String()), 5*time.Second)
	if !errors.Is(err, ErrIdentity) {
		t.Fatalf("dial: %v, want ErrIdentity", err)
	}
	good := newPort(t, "n3", secretA, tlsFor(ca, ca.Node(t, "n3")), anyone, 0)
	id, err := good.CheckNode(context.Background(), server.Addr().String())
	if err != nil || id != "n1" {
		t.Fatalf("check: %q, %v; want n1", id, err)
	}
}

// legacyServer is a node of the previous framing: hashicorp/raft's own
// TCP transport, whose RPCs the test answers.
func legacyServer(t *testing.T) *raft.NetworkTransport {
	t.Helper()
	tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	answer(t, tr, func(rpc raft.RPC) { rpc.Respond(&raft.AppendEntriesResponse{Term: 7, Success: true}, nil) })
	return tr
}

// answer hands the RPCs tr receives to f until the test ends.
func answer(t *testing.T, tr *raft.NetworkTransport, f func(raft.RPC)) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case rpc := <-tr.Consumer():
				f(rpc)
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		<-stopped
	})
}

// heartbeat sends an AppendEntries over tr to addr.
func heartbeat(tr *raft.NetworkTransport, addr raft.ServerAddress) (*raft.AppendEntriesResponse, error) {
	var resp raft.AppendEntriesResponse
	err := tr.AppendEntries("peer", addr, &raft.AppendEntriesRequest{Term: 7, RPCHeader: raft.RPCHeader{ID: []byte("n2"), Addr: []byte("x")}}, &resp)
	return &resp, err
}

// TestPreviousFraming: during a rolling upgrade a node without a secret
// dials a node of the previous framing that way and takes its
// connections into group 0; a node that holds the secret does neither,
// so a process without it cannot send Raft RPCs the old way.
func TestPreviousFraming(t *testing.T) {
	old := legacyServer(t)

	newNode := newPort(t, "n2", nil, nil, anyone, 0)
	tr := raft.NewNetworkTransport(newNode.Group(0), 3, 5*time.Second, io.Discard)
	defer tr.Close()
	if resp, err := heartbeat(tr, old.LocalAddr()); err != nil || !resp.Success {
		t.Fatalf("new → old without a secret: %+v, %v; want the previous framing", resp, err)
	}
	// old → new: the new node's transport answers.
	oldClient := legacyServer(t)
	answer(t, tr, func(rpc raft.RPC) { rpc.Respond(&raft.AppendEntriesResponse{Term: 7, Success: true}, nil) })
	if resp, err := heartbeat(oldClient, tr.LocalAddr()); err != nil || !resp.Success {
		t.Fatalf("old → new without a secret: %+v, %v; want it admitted", resp, err)
	}

	// A node handed a secret it does not require yet still takes them.
	lenient := newPort(t, "n4", nil, nil, anyone, 0)
	lenient.SetSecret(secretA, false)
	ltr := raft.NewNetworkTransport(lenient.Group(0), 3, 5*time.Second, io.Discard)
	defer ltr.Close()
	answer(t, ltr, func(rpc raft.RPC) { rpc.Respond(&raft.AppendEntriesResponse{Term: 7, Success: true}, nil) })
	if resp, err := heartbeat(oldClient, ltr.LocalAddr()); err != nil || !resp.Success {
		t.Fatalf("old → a node not requiring its secret yet: %+v, %v; want it admitted", resp, err)
	}
	if resp, err := heartbeat(ltr, old.LocalAddr()); err != nil || !resp.Success {
		t.Fatalf("a node not requiring its secret yet → old: %+v, %v; want the previous framing", resp, err)
	}

	guarded := newPort(t, "n3", secretA, nil, anyone, 0)
	gtr := raft.NewNetworkTransport(guarded.Group(0), 3, 5*time.Second, io.Discard)
	defer gtr.Close()
	answer(t, gtr, func(rpc raft.RPC) {
		t.Errorf("a node with a secret received %T over the previous framing", rpc.Command)
		rpc.Respond(nil, errors.New("refused"))
	})
	if _, err := heartbeat(gtr, old.LocalAddr()); err == nil {
		t.Error("a node with a secret dialed the previous framing")
	}
	if _, err := heartbeat(oldClient, gtr.LocalAddr()); err == nil {
		t.Error("a node with a secret answered the previous framing")
	}
	if st := guarded.Stats(); st.RefusedSecret == 0 {
		t.Errorf("stats %+v: want the previous framing refused for the secret", st)
	}
}

// TestSessionNoHeadOfLine: a group whose stream is not read (a snapshot
// install its receiver is slow to take in) does not hold up another
// group's stream on the same session: yamux's window per stream stops
// the blocked sender, never the connection.
func TestSessionNoHeadOfLine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	server := newPort(t, "n1", secretA, nil, anyone, 0, 1)
	g0, g1 := accepted(server.Group(0)), accepted(server.Group(1))
	client := newPort(t, "n2", secretA, nil, anyone, 0, 1)
	addr := raft.ServerAddress(server.Addr().String())
	big, err := client.Group(1).Dial(addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	// Group 1's receiver takes the stream and never reads it; its
	// sender writes until the window is full and stays blocked.
	writing := make(chan error, 1)
	go func() {
		chunk := make([]byte, 256<<10)
		for {
			if _, err := big.Write(chunk); err != nil {
				writing <- err
				return
			}
		}
	}()
	select {
	case s := <-g1:
		defer s.Close()
	case <-ctx.Done():
		t.Fatal("group 1's stream was not admitted")
	}
	for i := range 20 {
		c, err := client.Group(0).Dial(addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial group 0 beside a blocked stream: %v", err)
		}
		roundTrip(t, ctx, c, g0, fmt.Sprintf("heartbeat %d", i))
		c.Close()
	}
	select {
	case err := <-writing:
		t.Fatalf("the blocked sender's write ended: %v", err)
	default:
	}
}

// TestAwaitPeer: AwaitPeer on a peer whose port refuses connections
// (its process is down) dials again until the peer listens, within its
// bound, after which Dial goes through; past the bound, false; after
// StopDials, a wait in progress ends.
func TestAwaitPeer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // refused until the server below listens there
	client := newPort(t, "n2", secretA, nil, anyone, 0, 1)

	if _, err := client.Group(0).Dial(raft.ServerAddress(addr), time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial of a refusing peer: %v, want the refusal", err)
	}
	if client.Group(0).AwaitPeer(raft.ServerAddress(addr), 200*time.Millisecond) {
		t.Fatal("AwaitPeer reported a peer nobody runs reachable")
	}

	served := make(chan net.Conn, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("listen again on %s: %v", addr, err)
			return
		}
		server := NewPort(ln, nil, nil, "n1", 64, testLogger())
		server.SetSecret(secretA, true)
		server.Group(0).Attach(anyone)
		admitted := accepted(server.Group(0))
		server.Start()
		t.Cleanup(func() { server.Close() })
		select {
		case c := <-admitted:
			served <- c
		case <-ctx.Done():
		}
	}()
	if !client.Group(0).AwaitPeer(raft.ServerAddress(addr), 20*time.Second) {
		t.Fatal("AwaitPeer gave up on a peer that listens again within its bound")
	}
	c, err := client.Group(0).Dial(raft.ServerAddress(addr), time.Second)
	if err != nil {
		t.Fatalf("dial after AwaitPeer: %v", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-served:
		a.Close()
	case <-ctx.Done():
		t.Fatal("the peer admitted no stream")
	}

	// Group 1's waits for a port nobody listens on end at StopDials.
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	done := make(chan bool, 1)
	go func() { done <- client.Group(1).AwaitPeer(raft.ServerAddress(gone), time.Minute) }()
	time.Sleep(100 * time.Millisecond)
	client.Group(1).StopDials()
	select {
	case ok := <-done:
		if ok {
			t.Fatal("AwaitPeer reported a port nobody listens on reachable")
		}
	case <-ctx.Done():
		t.Fatal("AwaitPeer went on after StopDials")
	}
}

// TestStreamBeforeGroupOpens: a stream of a group that reached the port
// before the group's layer was attached (its replica had not opened) is
// closed once it is, never delivered: the request it carries predates
// the replica. A stream that arrives after is delivered.
func TestStreamBeforeGroupOpens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	server := newPort(t, "n1", secretA, nil, nil)
	client := newPort(t, "n2", secretA, nil, anyone, 5)
	addr := raft.ServerAddress(server.Addr().String())
	early, err := client.Group(5).Dial(addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	if _, err := early.Write([]byte("built before the group opened")); err != nil {
		t.Fatal(err)
	}
	// The stream waits at the port: it made the group's layer there.
	for {
		server.groupsMu.Lock()
		l := server.groups[5]
		server.groupsMu.Unlock()
		if l != nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the stream never reached the port")
		case <-time.After(5 * time.Millisecond):
		}
	}
	l := server.Group(5)
	l.Attach(anyone)
	admitted := accepted(l)
	closedByPeer(t, "a stream that arrived before the group's layer was attached", early)
	c, err := client.Group(5).Dial(addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip(t, ctx, c, admitted, "built after")
	select {
	case a := <-admitted:
		a.Close()
		t.Fatal("the early stream was delivered too")
	default:
	}
}
