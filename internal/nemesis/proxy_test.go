package nemesis

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer answers every line it reads with the same line, until
// closed at the end of the test.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); io.Copy(c, c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// echoConn is a client connection to an echo server.
type echoConn struct {
	net.Conn
	r *bufio.Reader
}

func dialEcho(t *testing.T, addr string) *echoConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &echoConn{Conn: c, r: bufio.NewReader(c)}
}

// tryEcho dials addr and makes one round trip: a connection refused
// or reset fails either step.
func tryEcho(addr, line string, wait time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		return err
	}
	defer c.Close()
	return (&echoConn{Conn: c, r: bufio.NewReader(c)}).roundTrip(line, wait)
}

// roundTrip sends a line and waits up to wait for it to come back.
func (c *echoConn) roundTrip(line string, wait time.Duration) error {
	c.SetDeadline(time.Now().Add(wait))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return err
	}
	got, err := c.r.ReadString('\n')
	if err != nil {
		return err
	}
	if got != line+"\n" {
		return errors.New("echo answered " + got)
	}
	return nil
}

func startNet(t *testing.T, n int) *Net {
	t.Helper()
	var targets []Target
	for range n {
		targets = append(targets, Target{Raft: echoServer(t), API: echoServer(t)})
	}
	nt, err := StartNet(targets, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nt.Close(); err != nil {
			t.Error(err)
		}
	})
	return nt
}

// TestNetCutOneDirection: cutting the link from node 0 to node 1 closes
// 0's connections to 1 and refuses (or blackholes) new ones, while 1 still
// reaches 0, old connections and new; healing opens it again.
func TestNetCutOneDirection(t *testing.T) {
	for _, mode := range []CutMode{Refuse, Blackhole} {
		t.Run(mode.String(), func(t *testing.T) {
			nt := startNet(t, 2)
			for _, ch := range []func(Target) string{
				func(r Target) string { return r.Raft },
				func(r Target) string { return r.API },
			} {
				fwd := dialEcho(t, ch(nt.Route(0, 1)))
				back := dialEcho(t, ch(nt.Route(1, 0)))
				if err := fwd.roundTrip("a", 5*time.Second); err != nil {
					t.Fatalf("0 -> 1 before the cut: %v", err)
				}
				if err := back.roundTrip("b", 5*time.Second); err != nil {
					t.Fatalf("1 -> 0 before the cut: %v", err)
				}

				nt.Set(0, 1, Link{Cut: mode})
				if err := fwd.roundTrip("c", 5*time.Second); err == nil {
					t.Fatal("0 -> 1: an open connection still carries traffic after the cut")
				}
				var fresh *echoConn
				var err error
				if mode == Blackhole {
					fresh = dialEcho(t, ch(nt.Route(0, 1))) // accepted, and held
					err = fresh.roundTrip("d", 300*time.Millisecond)
				} else {
					err = tryEcho(ch(nt.Route(0, 1)), "d", 300*time.Millisecond)
				}
				var ne net.Error
				switch {
				case err == nil:
					t.Fatal("0 -> 1: a new connection carries traffic across the cut")
				case mode == Blackhole && !(errors.As(err, &ne) && ne.Timeout()):
					t.Fatalf("0 -> 1 blackholed: %v, want a timeout", err)
				case mode == Refuse && errors.As(err, &ne) && ne.Timeout():
					t.Fatalf("0 -> 1 refused: timed out, want the connection closed")
				}
				if err := back.roundTrip("e", 5*time.Second); err != nil {
					t.Fatalf("1 -> 0 during the cut, open connection: %v", err)
				}
				if err := dialEcho(t, ch(nt.Route(1, 0))).roundTrip("f", 5*time.Second); err != nil {
					t.Fatalf("1 -> 0 during the cut, new connection: %v", err)
				}

				nt.Heal()
				if mode == Blackhole {
					// The held connection is closed, not left hanging.
					if err := fresh.roundTrip("g", 5*time.Second); err == nil || errors.As(err, &ne) && ne.Timeout() {
						t.Fatalf("blackholed connection after heal: %v, want it closed", err)
					}
				}
				if err := dialEcho(t, ch(nt.Route(0, 1))).roundTrip("h", 5*time.Second); err != nil {
					t.Fatalf("0 -> 1 after heal: %v", err)
				}
			}
			raft, api := nt.Stats(0, 1)
			if raft.Forwarded == 0 || api.Forwarded == 0 || raft.Bytes == 0 {
				t.Errorf("stats 0 -> 1: raft %+v api %+v; want forwarded connections and bytes", raft, api)
			}
		})
	}
}

// TestProxyLatency: every chunk waits at least the latency, each way.
func TestProxyLatency(t *testing.T) {
	p, err := StartProxy(echoServer(t), 7)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := dialEcho(t, p.Addr())
	if err := c.roundTrip("warm", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	const lat = 40 * time.Millisecond
	p.Set(Link{Latency: lat, Jitter: 10 * time.Millisecond})
	for i := range 3 {
		start := time.Now()
		if err := c.roundTrip("x", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		// A lower bound only: the proxy never delivers a chunk early.
		if took := time.Since(start); took < 2*lat {
			t.Fatalf("round trip %d took %v with %v latency each way", i, took, lat)
		}
	}
	p.Set(Link{})
	if err := c.roundTrip("y", 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestProxyLoss: a certain loss refuses every new connection and drops an
// open one at its next chunk; no loss drops nothing.
func TestProxyLoss(t *testing.T) {
	p, err := StartProxy(echoServer(t), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	open := dialEcho(t, p.Addr())
	if err := open.roundTrip("a", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Set(Link{Loss: 1})
	if err := open.roundTrip("b", 5*time.Second); err == nil {
		t.Error("an open connection survived a chunk at loss 1")
	}
	for i := range 5 {
		if err := tryEcho(p.Addr(), "c", 5*time.Second); err == nil {
			t.Errorf("connection %d carried traffic at loss 1", i)
		}
	}
	if st := p.Stats(); st.Refused < 5 || st.Dropped < 1 {
		t.Errorf("stats %+v: want 5 refused and 1 dropped", st)
	}
	p.Set(Link{})
	c := dialEcho(t, p.Addr())
	for range 20 {
		if err := c.roundTrip("d", 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
}

// TestProxyTargetDown: a proxy whose target is down closes connections
// at once, as the target would refuse them.
func TestProxyTargetDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p, err := StartProxy(addr, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	err = tryEcho(p.Addr(), "a", 5*time.Second)
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("through a proxy to a closed port: %v, want the connection closed", err)
	}
}
