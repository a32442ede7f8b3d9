package transport

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/peer"
)

// The Raft port: the raft.StreamLayer under a node's Raft transport
// (raft.NewNetworkTransportWithConfig), over TCP, with TLS when the node
// has peer TLS (package peer).
//
// Accept hands Raft only connections it admitted. A separate goroutine
// accepts TCP connections; with TLS, each handshake runs in a goroutine of
// its own under handshakeTimeout, so a peer that never finishes holds
// one slot for that long and never the accept loop. A connection is
// admitted when its certificate is a verified node certificate of a node
// the member function admits (Attach; replication's Node.raftMember), and
// otherwise closed, counted and logged (at most one line per
// refusalLogInterval). At most maxConns (NewStream) accepted connections
// are open at once, with or without TLS: beyond that a new one is closed
// at once (a member needs a few: Raft pools up to three per peer, plus
// one per pipeline), so a flood of sockets cannot take the file
// descriptors the partition logs need.

const (
	// handshakeTimeout bounds a TLS handshake on the Raft port.
	handshakeTimeout = 5 * time.Second
	// refusalLogInterval spaces the log lines of refused connections.
	refusalLogInterval = time.Second
)

// refusal is why the Raft port closed a connection.
type refusal int

const (
	refusedCap refusal = iota
	refusedHandshake
	refusedNotNode
	refusedNotMember
	numRefusals
)

func (r refusal) String() string {
	switch r {
	case refusedCap:
		return "connection cap reached"
	case refusedHandshake:
		return "tls handshake failed"
	case refusedNotNode:
		return "not a node certificate"
	case refusedNotMember:
		return "node is not a member"
	}
	return "unknown"
}

// Stream is a node's Raft port: it implements raft.StreamLayer. Start
// starts its accept loop; Close stops it, closes every connection it
// accepted and waits for its goroutines. Start and Attach are called
// once each; the other methods are safe for concurrent use.
type Stream struct {
	ln        net.Listener
	advertise net.Addr  // nil: ln's address
	peerTLS   *peer.TLS // nil: plaintext
	maxConns  int
	handshake time.Duration
	logger    *slog.Logger

	// member reports whether a node may open connections; Attach sets it
	// once and then closes attached. Handshakes that finish before wait.
	member   func(id string) bool
	attached chan struct{}

	// conns hands admitted connections to Accept.
	conns  chan net.Conn
	closed chan struct{}
	// ctx ends at Close; it bounds handshakes.
	ctx       context.Context
	cancel    context.CancelFunc
	closeOnce sync.Once
	wg        sync.WaitGroup // the accept loop and the handshakes

	mu sync.Mutex
	// open holds the accepted connections not closed yet, each with the
	// node id it was admitted as ("" in its handshake, or in plaintext).
	// Guarded by mu.
	open map[*streamConn]string

	admitted atomic.Uint64
	refused  [numRefusals]atomic.Uint64

	logMu sync.Mutex
	// lastLog is when a refusal was last logged, unlogged how many were
	// not since. Guarded by logMu.
	lastLog  time.Time
	unlogged int
}

var _ raft.StreamLayer = (*Stream)(nil)

// NewStream returns the Raft port over ln, which it owns: it advertises
// advertise (nil: ln's address), speaks TLS with peerTLS (nil:
// plaintext), holds at most maxConns accepted connections open and logs
// to logger. It starts nothing.
func NewStream(ln net.Listener, advertise net.Addr, peerTLS *peer.TLS, maxConns int, logger *slog.Logger) *Stream {
	ctx, cancel := context.WithCancel(context.Background())
	return &Stream{
		ln: ln, advertise: advertise, peerTLS: peerTLS, maxConns: maxConns, handshake: handshakeTimeout, logger: logger,
		attached: make(chan struct{}), conns: make(chan net.Conn), closed: make(chan struct{}),
		ctx: ctx, cancel: cancel, open: map[*streamConn]string{},
	}
}

// Start starts the accept loop. Under TLS, a connection whose handshake
// finishes before Attach waits for it.
func (s *Stream) Start() {
	s.wg.Add(1)
	go s.acceptLoop()
}

// Attach sets the check of which nodes may connect: member reports
// whether node id may open connections (replication's Node.raftMember:
// the latest Raft configuration the node knows). A node calls it once,
// when its Raft exists, which knows the configuration; member must be
// safe for concurrent use.
func (s *Stream) Attach(member func(id string) bool) {
	s.member = member
	close(s.attached)
}

// Accept implements net.Listener: it returns the next admitted
// connection.
func (s *Stream) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener: it stops accepting, closes every
// connection accepted and waits for the accept loop and the handshakes.
func (s *Stream) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		s.cancel()
		err = s.ln.Close()
		s.mu.Lock()
		open := make([]*streamConn, 0, len(s.open))
		for c := range s.open {
			open = append(open, c)
		}
		s.mu.Unlock()
		for _, c := range open {
			c.Close()
		}
		s.wg.Wait()
	})
	return err
}

// Addr implements net.Listener: the advertised address, or the bound one.
func (s *Stream) Addr() net.Addr {
	if s.advertise != nil {
		return s.advertise
	}
	return s.ln.Addr()
}

// Dial implements raft.StreamLayer.
func (s *Stream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, _, err := s.DialNode(ctx, string(addr))
	return c, err
}

// DialNode connects to the Raft port at addr and returns the connection
// with, under TLS, the node id its certificate carries ("" in plaintext);
// a server that presents no node certificate is refused. Raft dials
// through it, and so does a node that checks a joining node's Raft port.
func (s *Stream) DialNode(ctx context.Context, addr string) (net.Conn, string, error) {
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, "", err
	}
	if s.peerTLS == nil {
		return raw, "", nil
	}
	c, id, err := s.peerTLS.Handshake(ctx, raw, addr)
	if err != nil {
		return nil, "", err
	}
	return c, id, nil
}

// acceptLoop accepts TCP connections until Close.
func (s *Stream) acceptLoop() {
	defer s.wg.Done()
	var delay time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.closed:
				return
			default:
			}
			// Out of file descriptors, say: wait a little, as net/http
			// does, rather than spin.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.logger.Warn("raft port: accept failed; retrying", "err", err, "retry_in", delay)
			select {
			case <-s.closed:
				return
			case <-time.After(delay):
			}
			continue
		}
		delay = 0
		sc, ok := s.track(c)
		if !ok {
			s.refuse(refusedCap, c.RemoteAddr(), "", nil)
			c.Close()
			continue
		}
		if s.peerTLS == nil {
			// No handshake to wait for: Raft's own accept loop takes
			// connections as fast as they come.
			s.deliver(sc)
			continue
		}
		s.wg.Add(1)
		go s.admit(sc)
	}
}

// admit runs sc's TLS handshake and hands it to Raft if its certificate
// is a node's that Raft admits; it closes it otherwise.
func (s *Stream) admit(sc *streamConn) {
	defer s.wg.Done()
	tc := tls.Server(sc, s.peerTLS.Server)
	ctx, cancel := context.WithTimeout(s.ctx, s.handshake)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		s.refuse(refusedHandshake, sc.RemoteAddr(), "", err)
		sc.Close()
		return
	}
	cs := tc.ConnectionState()
	id, ok := s.peerTLS.VerifiedNode(&cs)
	if !ok {
		s.refuse(refusedNotNode, sc.RemoteAddr(), certName(cs), nil)
		sc.Close()
		return
	}
	select {
	case <-s.attached:
	case <-s.closed:
		sc.Close()
		return
	}
	if !s.member(id) {
		s.refuse(refusedNotMember, sc.RemoteAddr(), id, nil)
		sc.Close()
		return
	}
	s.mu.Lock()
	if _, open := s.open[sc]; open {
		s.open[sc] = id
	}
	s.mu.Unlock()
	s.deliver(tc)
}

// certName names the peer's certificate in a log line.
func certName(cs tls.ConnectionState) string {
	if len(cs.PeerCertificates) == 0 {
		return ""
	}
	return cs.PeerCertificates[0].Subject.String()
}

// deliver hands c to Accept, or closes it at Close.
func (s *Stream) deliver(c net.Conn) {
	select {
	case s.conns <- c:
		s.admitted.Add(1)
	case <-s.closed:
		c.Close()
	}
}

// track counts c among the open connections, unless maxConns are open.
func (s *Stream) track(c net.Conn) (*streamConn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.open) >= s.maxConns {
		return nil, false
	}
	sc := &streamConn{Conn: c, s: s}
	s.open[sc] = ""
	return sc, true
}

// Prune closes the admitted connections of nodes the member check of
// Attach no longer admits (a node removed from the configuration), so a
// removed node keeps no connection it opened while it was a member. The
// node's housekeeping calls it; before Attach, and in plaintext, it does
// nothing.
func (s *Stream) Prune() {
	if s.peerTLS == nil {
		return
	}
	select {
	case <-s.attached:
	default:
		return
	}
	type entry struct {
		c  *streamConn
		id string
	}
	s.mu.Lock()
	admitted := make([]entry, 0, len(s.open))
	for c, id := range s.open {
		if id != "" {
			admitted = append(admitted, entry{c, id})
		}
	}
	s.mu.Unlock()
	for _, e := range admitted {
		if !s.member(e.id) {
			s.logger.Info("raft port: closing a connection of a node no longer a member", "node", e.id, "remote", e.c.RemoteAddr())
			e.c.Close()
		}
	}
}

// refuse counts and logs a refused connection. Callers call it before
// they close the connection, so a peer that sees the close finds it
// counted.
func (s *Stream) refuse(why refusal, remote net.Addr, who string, err error) {
	select {
	case <-s.closed:
		return // closing: the handshakes Close cut short are no refusals
	default:
	}
	s.refused[why].Add(1)
	s.logMu.Lock()
	now := time.Now()
	if now.Sub(s.lastLog) < refusalLogInterval {
		s.unlogged++
		s.logMu.Unlock()
		return
	}
	unlogged := s.unlogged
	s.lastLog, s.unlogged = now, 0
	s.logMu.Unlock()
	s.logger.Warn("raft port: refused a connection", "reason", why.String(), "remote", remote, "peer", who, "err", err,
		"refused_unlogged", unlogged)
}

// Stats returns the port's counters.
func (s *Stream) Stats() backend.RaftConnStats {
	s.mu.Lock()
	open := len(s.open)
	s.mu.Unlock()
	return backend.RaftConnStats{
		Open: open, Admitted: s.admitted.Load(),
		RefusedCap: s.refused[refusedCap].Load(), RefusedHandshake: s.refused[refusedHandshake].Load(),
		RefusedNotNode: s.refused[refusedNotNode].Load(), RefusedNotMember: s.refused[refusedNotMember].Load(),
	}
}

// streamConn is an accepted connection; closing it frees its slot.
type streamConn struct {
	net.Conn
	s *Stream
	// closed is set by Close.
	closed atomic.Bool
}

// Read reads from the connection; once Close was called, a read it cut
// short ends as at the peer's close (Raft's transport logs any other
// error of an idle connection as a failure).
func (c *streamConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && c.closed.Load() {
		err = io.EOF
	}
	return n, err
}

// Close closes the connection and frees its slot; it may be called more
// than once.
func (c *streamConn) Close() error {
	c.closed.Store(true)
	err := c.Conn.Close()
	c.s.mu.Lock()
	delete(c.s.open, c)
	c.s.mu.Unlock()
	return err
}
