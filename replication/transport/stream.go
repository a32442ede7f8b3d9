package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/peer"
)

// The Raft port: one TCP listener (with TLS when the node has peer TLS,
// package peer) that carries every Raft group of the node, each through
// a Layer (mux.go), the raft.StreamLayer under that group's Raft
// transport.
//
// A separate goroutine accepts TCP connections and hands each to a
// goroutine of its own, which under handshakeTimeout runs the TLS
// handshake (a connection must present a verified node certificate) and
// reads the first bytes: the mux hello (mux.go) starts a session, which
// proves the cluster secret when either side holds one and then carries
// one stream per Raft connection, each naming its group; the first byte
// of a Raft RPC is a connection of the previous framing, one connection
// per Raft connection, which only group 0 receives and only while the
// node holds no cluster secret (a cluster that predates the secret,
// docs/security.md "Peers"). Anything else is refused, counted and
// logged (at most one line per refusalLogInterval). At most maxConns
// (NewPort) accepted connections are open at once, in their handshake
// or serving: beyond that a new one is closed at once, so a flood of
// sockets cannot take the file descriptors the partition logs need. A
// member needs one connection for its session (Raft of the previous
// framing pooled up to three per peer, plus one per pipeline).

const (
	// handshakeTimeout bounds a connection's TLS handshake and hello on
	// the Raft port.
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
	refusedSecret
	numRefusals
)

func (r refusal) String() string {
	switch r {
	case refusedCap:
		return "connection cap reached"
	case refusedHandshake:
		return "handshake failed"
	case refusedNotNode:
		return "not a node certificate"
	case refusedNotMember:
		return "node is not a member"
	case refusedSecret:
		return "cluster secret not proven"
	}
	return "unknown"
}

// Port is a node's Raft port. Start starts its accept loop; Close stops
// it, closes every connection and session it accepted or dialed and
// waits for its goroutines. Start is called once; the other methods are
// safe for concurrent use.
type Port struct {
	ln        net.Listener
	advertise net.Addr  // nil: ln's address
	peerTLS   *peer.TLS // nil: plaintext
	nodeID    string
	maxConns  int
	handshake time.Duration
	logger    *slog.Logger
	muxConf   *yamux.Config

	// secret is the cluster secret and whether it is required
	// (SetSecret); nil: none.
	secret atomic.Pointer[secretState]
	// calls answers calls (call.go); nil: none taken.
	calls atomic.Pointer[CallHandler]

	groupsMu sync.Mutex
	// groups are the layers by group id. Guarded by groupsMu.
	groups map[uint64]*Layer

	closed chan struct{}
	// ctx ends at Close; it bounds handshakes and dials.
	ctx       context.Context
	cancel    context.CancelFunc
	closeOnce sync.Once
	wg        sync.WaitGroup // the accept loop, handshakes and sessions

	mu sync.Mutex
	// open holds the accepted connections not closed yet, each with the
	// node id it proved ("" in its handshake, or when nothing proved
	// one: plaintext without a cluster secret). Guarded by mu.
	open map[*streamConn]string

	// dialed are the sessions this node opened, by address (mux.go).
	dialMu sync.Mutex
	dialed map[string]*dialEntry
	// legacyUntil holds the addresses that answered the mux hello as a
	// build of the previous framing does, and until when to dial them
	// that way. Guarded by dialMu.
	legacyUntil map[string]time.Time

	admitted atomic.Uint64
	refused  [numRefusals]atomic.Uint64
	// sessions counts the sessions open, accepted and dialed.
	sessions atomic.Int64

	logMu sync.Mutex
	// lastLog is when a refusal was last logged, unlogged how many were
	// not since. Guarded by logMu.
	lastLog  time.Time
	unlogged int
}

// NewPort returns the Raft port of node nodeID over ln, which it owns:
// it advertises advertise (nil: ln's address), speaks TLS with peerTLS
// (nil: plaintext), holds at most maxConns accepted connections open and
// logs to logger. It starts nothing.
func NewPort(ln net.Listener, advertise net.Addr, peerTLS *peer.TLS, nodeID string, maxConns int, logger *slog.Logger) *Port {
	ctx, cancel := context.WithCancel(context.Background())
	return &Port{
		ln: ln, advertise: advertise, peerTLS: peerTLS, nodeID: nodeID, maxConns: maxConns, handshake: handshakeTimeout, logger: logger,
		muxConf: muxConfig(logger), groups: map[uint64]*Layer{}, closed: make(chan struct{}),
		ctx: ctx, cancel: cancel, open: map[*streamConn]string{}, dialed: map[string]*dialEntry{}, legacyUntil: map[string]time.Time{},
	}
}

// Start starts the accept loop. A connection that names a group before
// its layer exists, or is attached, waits for it until its handshake
// deadline.
func (p *Port) Start() {
	p.wg.Add(1)
	go p.acceptLoop()
}

// secretState is the port's cluster secret.
type secretState struct {
	key []byte
	// required: sessions must prove key, and Raft's own framing is
	// refused; else the port proves key to a peer that can check it and
	// takes unproven peers too (a cluster being handed its secret).
	required bool
}

// SetSecret sets the cluster secret the port proves from now on
// (replication's secret.go), and whether it requires it of every
// session; sessions open before keep going. Empty: none.
func (p *Port) SetSecret(secret []byte, required bool) {
	if len(secret) == 0 {
		p.secret.Store(nil)
		return
	}
	p.secret.Store(&secretState{key: append([]byte(nil), secret...), required: required})
}

// ClusterSecret returns the cluster secret the port proves (nil for
// none; the caller must not change it) and whether it requires it.
func (p *Port) ClusterSecret() ([]byte, bool) {
	if st := p.secret.Load(); st != nil {
		return st.key, st.required
	}
	return nil, false
}

// strict reports whether the port requires the cluster secret.
func (p *Port) strict() bool {
	_, required := p.ClusterSecret()
	return required
}

// Close stops accepting, closes every connection accepted and every
// session dialed, and waits for the port's goroutines.
func (p *Port) Close() error {
	var err error
	p.closeOnce.Do(func() {
		close(p.closed)
		p.cancel()
		err = p.ln.Close()
		p.mu.Lock()
		open := make([]*streamConn, 0, len(p.open))
		for c := range p.open {
			open = append(open, c)
		}
		p.mu.Unlock()
		for _, c := range open {
			c.Close()
		}
		p.closeDialed()
		p.wg.Wait()
	})
	return err
}

// Addr is the advertised address, or the bound one.
func (p *Port) Addr() net.Addr {
	if p.advertise != nil {
		return p.advertise
	}
	return p.ln.Addr()
}

// acceptLoop accepts TCP connections until Close.
func (p *Port) acceptLoop() {
	defer p.wg.Done()
	var delay time.Duration
	for {
		c, err := p.ln.Accept()
		if err != nil {
			select {
			case <-p.closed:
				return
			default:
			}
			// Out of file descriptors, say: wait a little, as net/http
			// does, rather than spin.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			p.logger.Warn("raft port: accept failed; retrying", "err", err, "retry_in", delay)
			select {
			case <-p.closed:
				return
			case <-time.After(delay):
			}
			continue
		}
		delay = 0
		sc, ok := p.track(c)
		if !ok {
			p.refuse(refusedCap, c.RemoteAddr(), "", nil)
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.admit(sc)
	}
}

// admit runs sc's TLS handshake, if any, and reads its first bytes: it
// starts a session for a mux hello (serveSession, mux.go) and hands a
// connection of the previous framing to group 0; it closes sc
// otherwise.
func (p *Port) admit(sc *streamConn) {
	defer p.wg.Done()
	deadline := time.Now().Add(p.handshake)
	sc.SetDeadline(deadline)
	var (
		conn net.Conn = sc
		id   string   // the verified node id, under TLS
	)
	if p.peerTLS != nil {
		tc := tls.Server(sc, p.peerTLS.Server)
		ctx, cancel := context.WithDeadline(p.ctx, deadline)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			p.refuse(refusedHandshake, sc.RemoteAddr(), "", err)
			sc.Close()
			return
		}
		cs := tc.ConnectionState()
		var ok bool
		if id, ok = p.peerTLS.VerifiedNode(&cs); !ok {
			p.refuse(refusedNotNode, sc.RemoteAddr(), certName(cs), nil)
			sc.Close()
			return
		}
		if !p.memberOfAny(id) {
			p.refuse(refusedNotMember, sc.RemoteAddr(), id, nil)
			sc.Close()
			return
		}
		conn = tc
	}
	br := bufio.NewReaderSize(conn, 64)
	first, err := br.Peek(1)
	if err != nil {
		p.refuse(refusedHandshake, sc.RemoteAddr(), id, err)
		sc.Close()
		return
	}
	rc := &readerConn{Conn: conn, r: br}
	switch {
	case first[0] == muxMagic[0]:
		peerID, err := p.serverHello(rc, id)
		if err != nil {
			p.refuse(refusalOf(err), sc.RemoteAddr(), id, err)
			sc.Close()
			return
		}
		sc.SetDeadline(time.Time{})
		p.setPeer(sc, peerID)
		p.serveSession(sc, rc, peerID)
	case first[0] <= maxLegacyRPC:
		if p.strict() {
			// The previous framing proves nothing: a node that requires
			// the cluster secret takes sessions only.
			p.refuse(refusedSecret, sc.RemoteAddr(), id, errLegacyFraming)
			sc.Close()
			return
		}
		l, err := p.layer(0, deadline)
		if err != nil {
			p.refuse(refusedHandshake, sc.RemoteAddr(), id, err)
			sc.Close()
			return
		}
		if id != "" && !l.member(id) {
			p.refuse(refusedNotMember, sc.RemoteAddr(), id, nil)
			sc.Close()
			return
		}
		sc.SetDeadline(time.Time{})
		p.setPeer(sc, id)
		l.deliver(rc)
	default:
		p.refuse(refusedHandshake, sc.RemoteAddr(), id, errNotRaft)
		sc.Close()
	}
}

// setPeer records the node id sc proved.
func (p *Port) setPeer(sc *streamConn, id string) {
	p.mu.Lock()
	if _, open := p.open[sc]; open {
		p.open[sc] = id
	}
	p.mu.Unlock()
}

// certName names the peer's certificate in a log line.
func certName(cs tls.ConnectionState) string {
	if len(cs.PeerCertificates) == 0 {
		return ""
	}
	return cs.PeerCertificates[0].Subject.String()
}

// track counts c among the open connections, unless maxConns are open.
func (p *Port) track(c net.Conn) (*streamConn, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.open) >= p.maxConns {
		return nil, false
	}
	sc := &streamConn{Conn: c, p: p}
	p.open[sc] = ""
	return sc, true
}

// Prune closes the accepted connections (and so the sessions) of nodes
// that are members of none of the port's groups any more (a node removed
// from the configuration), so a removed node keeps no connection it
// opened while it was a member. The node's housekeeping calls it. Only
// connections whose node proved who it is (a node certificate, or the
// cluster secret) are checked.
func (p *Port) Prune() {
	type entry struct {
		c  *streamConn
		id string
	}
	p.mu.Lock()
	proven := make([]entry, 0, len(p.open))
	for c, id := range p.open {
		if id != "" {
			proven = append(proven, entry{c, id})
		}
	}
	p.mu.Unlock()
	for _, e := range proven {
		if !p.memberOfAny(e.id) {
			p.logger.Info("raft port: closing a connection of a node no longer a member", "node", e.id, "remote", e.c.RemoteAddr())
			e.c.Close()
		}
	}
}

// memberOfAny reports whether any attached layer admits node id; with no
// layer attached, true.
func (p *Port) memberOfAny(id string) bool {
	p.groupsMu.Lock()
	layers := make([]*Layer, 0, len(p.groups))
	for _, l := range p.groups {
		layers = append(layers, l)
	}
	p.groupsMu.Unlock()
	any := false
	for _, l := range layers {
		select {
		case <-l.attached:
		default:
			continue
		}
		if l.member(id) {
			return true
		}
		any = true
	}
	return !any
}

// refuse counts and logs a refused connection or stream. Callers call it
// before they close it, so a peer that sees the close finds it counted.
func (p *Port) refuse(why refusal, remote net.Addr, who string, err error) {
	select {
	case <-p.closed:
		return // closing: the handshakes Close cut short are no refusals
	default:
	}
	p.refused[why].Add(1)
	p.logMu.Lock()
	now := time.Now()
	if now.Sub(p.lastLog) < refusalLogInterval {
		p.unlogged++
		p.logMu.Unlock()
		return
	}
	unlogged := p.unlogged
	p.lastLog, p.unlogged = now, 0
	p.logMu.Unlock()
	p.logger.Warn("raft port: refused a connection", "reason", why.String(), "remote", remote, "peer", who, "err", err,
		"refused_unlogged", unlogged)
}

// Stats returns the port's counters.
func (p *Port) Stats() backend.RaftConnStats {
	p.mu.Lock()
	open := len(p.open)
	p.mu.Unlock()
	secret := backend.SecretNone
	if key, required := p.ClusterSecret(); required {
		secret = backend.SecretRequired
	} else if key != nil {
		secret = backend.SecretHeld
	}
	return backend.RaftConnStats{
		Open: open, Admitted: p.admitted.Load(), Sessions: int(p.sessions.Load()), Secret: secret,
		RefusedCap: p.refused[refusedCap].Load(), RefusedHandshake: p.refused[refusedHandshake].Load(),
		RefusedNotNode: p.refused[refusedNotNode].Load(), RefusedNotMember: p.refused[refusedNotMember].Load(),
		RefusedSecret: p.refused[refusedSecret].Load(),
	}
}

// streamConn is an accepted connection; closing it frees its slot.
type streamConn struct {
	net.Conn
	p *Port
	// closed is set by Close.
	closed atomic.Bool
}

// Read reads from the connection; once Close was called, a read it cut
// short ends as at the peer's close (Raft's transport logs any other
// error of an idle connection as a failure).
func (c *streamConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
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
	c.p.mu.Lock()
	delete(c.p.open, c)
	c.p.mu.Unlock()
	return err
}

// readerConn is a connection whose first bytes were read ahead into r.
type readerConn struct {
	net.Conn
	r *bufio.Reader
}

// Read reads what was read ahead, then the connection.
func (c *readerConn) Read(b []byte) (int, error) { return c.r.Read(b) }
