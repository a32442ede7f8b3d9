package transport

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/yamux"
)

// Sessions on the Raft port: one yamux session per dialing node and peer
// (each direction its own), its streams the Raft connections of every
// group, each stream opened with the group's id. hashicorp/yamux is
// Consul's and Nomad's multiplexer for the same job (hashicorp/raft's
// NetworkTransport over one port); it brings per-stream flow control,
// so one group's snapshot install cannot starve another group's
// heartbeats, and deadlines on streams, which Raft's transport sets.
//
// The hello, before the session (all integers big-endian):
//
//	client: muxMagic | flags(1) | client nonce(32) | len(1) | client node id
//	server: flags(1) | server nonce(32) | len(1) | server node id | server proof(32, if flagSecret)
//	client: client proof(32, if both hold a secret)
//	server: verdict(1): verdictOK, or why it refuses, and then it closes
//
// flagSecret says the side holds a cluster secret; the proofs are sent
// when both do. They are HMAC-SHA256 under the secret of a label for the
// side, both nonces and both node ids, so neither can be replayed on
// another connection or for another node. A side that requires the
// secret (Port.SetSecret) refuses a peer that proves none or another; a
// side that holds it without requiring it (a cluster being handed its
// secret) takes such a peer unproven, as do two sides without one (a
// cluster that predates the secret). Under peer TLS the node ids must
// also be those of the certificates. Each stream starts with its group
// id (8 bytes); the server checks that group's member function for the
// proven node id.

const (
	// muxMagic starts a session's hello. Its first byte is no Raft RPC
	// type of the previous framing (maxLegacyRPC) and no TLS record.
	muxMagic = "LOGDMUX1"
	// maxLegacyRPC is the highest first byte of a connection of the
	// previous framing: hashicorp/raft's RPC types (AppendEntries,
	// RequestVote, InstallSnapshot, TimeoutNow).
	maxLegacyRPC = 3
	nonceLen     = 32
	proofLen     = sha256.Size
	flagSecret   = 1

	verdictOK       = 0
	verdictNoSecret = 1 // the client proved no secret; the server holds one
	verdictBadProof = 2 // the client's proof is wrong
	verdictIdentity = 3 // the node id is not the certificate's

	// legacyRetry is how long a node dials a peer that answered the
	// hello as a build of the previous framing that way before it
	// offers a session again (the peer may have been upgraded).
	legacyRetry = 5 * time.Second
	// maxSessionStreams bounds the streams of one session: Raft opens
	// a few per group and peer.
	maxSessionStreams = 1024
	// streamWindow is yamux's per-stream window: Raft's AppendEntries
	// of a full batch (replication's MaxAppendEntries) runs to
	// megabytes, and a window below it adds round trips per RPC.
	streamWindow = 4 << 20
)

var (
	errLegacyFraming = errors.New("a connection of the previous framing, without the cluster secret")
	errNotRaft       = errors.New("neither a session hello nor a Raft RPC")
	errOldPeer       = errors.New("the peer answered as a build of the previous framing")
	// ErrSecret is a session refused for the cluster secret: a side
	// holds one and the other proved none, or a wrong one.
	ErrSecret = errors.New("cluster secret not proven")
	// ErrIdentity is a hello whose node id is not its certificate's.
	ErrIdentity = errors.New("node id is not the certificate's")
)

// refusalOf is the refusal a failed server hello counts as.
func refusalOf(err error) refusal {
	switch {
	case errors.Is(err, ErrSecret):
		return refusedSecret
	case errors.Is(err, ErrIdentity):
		return refusedNotNode
	}
	return refusedHandshake
}

// muxConfig is the yamux configuration of every session: its lines go to
// logger at debug level, and a stream's open and close are bounded.
func muxConfig(logger *slog.Logger) *yamux.Config {
	c := yamux.DefaultConfig()
	c.LogOutput = nil
	c.Logger = slog.NewLogLogger(logger.Handler(), slog.LevelDebug)
	c.KeepAliveInterval = 10 * time.Second
	c.MaxStreamWindowSize = streamWindow
	c.StreamOpenTimeout = 10 * time.Second
	c.StreamCloseTimeout = 10 * time.Second
	return c
}

// proof is side's HMAC of the hello's nonces and node ids under secret.
func proof(secret []byte, side string, clientNonce, serverNonce []byte, clientID, serverID string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("logd raft session " + side + "\x00"))
	m.Write(clientNonce)
	m.Write(serverNonce)
	m.Write([]byte{byte(len(clientID))})
	m.Write([]byte(clientID))
	m.Write([]byte{byte(len(serverID))})
	m.Write([]byte(serverID))
	return m.Sum(nil)
}

// readID reads a length-prefixed node id.
func readID(r io.Reader) (string, error) {
	var n [1]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return "", err
	}
	b := make([]byte, n[0])
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// helloHead writes this side's part of the hello common to both sides
// (flags, a new nonce, the node id) to out, and returns the nonce.
func (p *Port) helloHead(out *bytes.Buffer, secret []byte) []byte {
	flags := byte(0)
	if secret != nil {
		flags |= flagSecret
	}
	nonce := make([]byte, nonceLen)
	rand.Read(nonce)
	out.WriteByte(flags)
	out.Write(nonce)
	out.WriteByte(byte(len(p.nodeID)))
	out.WriteString(p.nodeID)
	return nonce
}

// serverHello runs the server's side of the hello on c (its deadline set
// by the caller) and returns the client's node id, proven by its
// certificate (certID, "" in plaintext) or the cluster secret, or ""
// when nothing proved one.
func (p *Port) serverHello(c net.Conn, certID string) (string, error) {
	head := make([]byte, len(muxMagic)+1+nonceLen)
	if _, err := io.ReadFull(c, head); err != nil {
		return "", fmt.Errorf("read the hello: %w", err)
	}
	if string(head[:len(muxMagic)]) != muxMagic {
		return "", errNotRaft
	}
	clientFlags, clientNonce := head[len(muxMagic)], head[len(muxMagic)+1:]
	clientID, err := readID(c)
	if err != nil {
		return "", fmt.Errorf("read the hello: %w", err)
	}
	secret, required := p.ClusterSecret()
	var out bytes.Buffer
	serverNonce := p.helloHead(&out, secret)
	if secret != nil {
		out.Write(proof(secret, "server", clientNonce, serverNonce, clientID, p.nodeID))
	}
	if _, err := c.Write(out.Bytes()); err != nil {
		return "", fmt.Errorf("answer the hello: %w", err)
	}
	verdict, proven := byte(verdictOK), false
	if secret != nil && clientFlags&flagSecret != 0 {
		got := make([]byte, proofLen)
		if _, err := io.ReadFull(c, got); err != nil {
			return "", fmt.Errorf("read the client's proof: %w", err)
		}
		proven = hmac.Equal(got, proof(secret, "client", clientNonce, serverNonce, clientID, p.nodeID))
	}
	switch {
	case certID != "" && clientID != certID:
		verdict = verdictIdentity
	case required && clientFlags&flagSecret == 0:
		verdict = verdictNoSecret
	case required && !proven:
		verdict = verdictBadProof
	}
	if _, err := c.Write([]byte{verdict}); err != nil {
		return "", fmt.Errorf("answer the hello: %w", err)
	}
	switch verdict {
	case verdictIdentity:
		return "", fmt.Errorf("%w: the hello names %q, the certificate %q", ErrIdentity, clientID, certID)
	case verdictNoSecret:
		return "", fmt.Errorf("%w: node %q holds none", ErrSecret, clientID)
	case verdictBadProof:
		return "", fmt.Errorf("%w: node %q proved another", ErrSecret, clientID)
	}
	if certID != "" {
		return certID, nil
	}
	if proven {
		return clientID, nil
	}
	return "", nil
}

// clientHello runs the client's side of the hello on c and returns the
// server's node id, proven by its certificate (certID) or the cluster
// secret, or "" when nothing proved one. A server that closes before it
// answers is errOldPeer.
func (p *Port) clientHello(c net.Conn, certID string) (string, error) {
	secret, required := p.ClusterSecret()
	var out bytes.Buffer
	out.WriteString(muxMagic)
	clientNonce := p.helloHead(&out, secret)
	if _, err := c.Write(out.Bytes()); err != nil {
		return "", fmt.Errorf("send the hello: %w", err)
	}
	head := make([]byte, 1+nonceLen)
	if n, err := io.ReadFull(c, head); err != nil {
		if n == 0 && (errors.Is(err, io.EOF) || isReset(err)) {
			return "", errOldPeer
		}
		return "", fmt.Errorf("read the answer: %w", err)
	}
	serverFlags, serverNonce := head[0], head[1:]
	serverID, err := readID(c)
	if err != nil {
		return "", fmt.Errorf("read the answer: %w", err)
	}
	if certID != "" && serverID != certID {
		return "", fmt.Errorf("%w: the answer names %q, the certificate %q", ErrIdentity, serverID, certID)
	}
	var serverProof []byte
	if serverFlags&flagSecret != 0 {
		serverProof = make([]byte, proofLen)
		if _, err := io.ReadFull(c, serverProof); err != nil {
			return "", fmt.Errorf("read the answer: %w", err)
		}
	}
	proven := false
	if secret != nil {
		proven = serverProof != nil && hmac.Equal(serverProof, proof(secret, "server", clientNonce, serverNonce, p.nodeID, serverID))
		switch {
		case required && serverProof == nil:
			return "", fmt.Errorf("%w: node %q at %s holds none", ErrSecret, serverID, c.RemoteAddr())
		case required && !proven:
			return "", fmt.Errorf("%w: node %q at %s proved another", ErrSecret, serverID, c.RemoteAddr())
		}
		if serverProof != nil {
			if _, err := c.Write(proof(secret, "client", clientNonce, serverNonce, p.nodeID, serverID)); err != nil {
				return "", fmt.Errorf("send the proof: %w", err)
			}
		}
	}
	var verdict [1]byte
	if _, err := io.ReadFull(c, verdict[:]); err != nil {
		return "", fmt.Errorf("read the verdict: %w", err)
	}
	switch verdict[0] {
	case verdictOK:
	case verdictNoSecret:
		return "", fmt.Errorf("%w: node %q at %s holds one and this node none", ErrSecret, serverID, c.RemoteAddr())
	case verdictBadProof:
		return "", fmt.Errorf("%w: node %q at %s holds another", ErrSecret, serverID, c.RemoteAddr())
	case verdictIdentity:
		return "", fmt.Errorf("%w: node %q at %s refused this node's id %q", ErrIdentity, serverID, c.RemoteAddr(), p.nodeID)
	default:
		return "", fmt.Errorf("node %q at %s refused the session (verdict %d)", serverID, c.RemoteAddr(), verdict[0])
	}
	if certID != "" {
		return certID, nil
	}
	if proven {
		return serverID, nil
	}
	return "", nil
}

// serveSession runs an accepted session until it ends: each stream names
// its group, and goes to that group's layer if the session's node is a
// member (any node when the session proved none).
func (p *Port) serveSession(sc *streamConn, c net.Conn, peerID string) {
	sess, err := yamux.Server(c, p.muxConf)
	if err != nil {
		sc.Close()
		return
	}
	p.sessions.Add(1)
	defer p.sessions.Add(-1)
	defer sess.Close()
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			return
		}
		if sess.NumStreams() > maxSessionStreams {
			p.refuse(refusedCap, sc.RemoteAddr(), peerID, errors.New("too many streams in one session"))
			st.Close()
			continue
		}
		p.wg.Add(1)
		go p.routeStream(sc, st, peerID)
	}
}

// routeStream reads st's group id and hands st to that group's layer.
func (p *Port) routeStream(sc *streamConn, st *yamux.Stream, peerID string) {
	defer p.wg.Done()
	deadline := time.Now().Add(p.handshake)
	st.SetReadDeadline(deadline)
	var gid [8]byte
	if _, err := io.ReadFull(st, gid[:]); err != nil {
		st.Close()
		return
	}
	st.SetReadDeadline(time.Time{})
	if id := binary.BigEndian.Uint64(gid[:]); id&callBit != 0 {
		p.serveCall(st, peerID, id&^callBit, deadline)
		return
	}
	id := binary.BigEndian.Uint64(gid[:])
	early := !p.attached(id)
	l, err := p.layer(id, deadline)
	if err != nil {
		p.refuse(refusedHandshake, sc.RemoteAddr(), peerID, err)
		st.Close()
		return
	}
	if peerID != "" && !l.member(peerID) {
		p.refuse(refusedNotMember, sc.RemoteAddr(), peerID, fmt.Errorf("not a member of group %d", l.id))
		st.Close()
		return
	}
	if early {
		// The stream reached this node before its replica of the group
		// opened: the request it carries was built before, with the
		// leader's commit index of then, and a restarted replica takes
		// the first commit index it hears for the leader's, to know when
		// it caught up (replication's followerCaughtUp). The caller,
		// held here until the replica opened, fails once and sends a new
		// request at once.
		st.Close()
		return
	}
	l.deliver(st)
}

// attached reports whether group id's layer is attached now.
func (p *Port) attached(id uint64) bool {
	p.groupsMu.Lock()
	l := p.groups[id]
	p.groupsMu.Unlock()
	if l == nil {
		return false
	}
	select {
	case <-l.attached:
		return true
	default:
		return false
	}
}

// dialEntry is a session this node dials, or is dialing, to one address.
type dialEntry struct {
	ready chan struct{} // closed once the dial ended
	sess  *yamux.Session
	id    string // the peer's proven node id
	err   error
}

// session returns an open session to addr, dialing one if there is
// none; errOldPeer when addr answered as a build of the previous
// framing.
func (p *Port) session(ctx context.Context, addr string) (*yamux.Session, error) {
	for {
		p.dialMu.Lock()
		e := p.dialed[addr]
		if e == nil {
			e = &dialEntry{ready: make(chan struct{})}
			p.dialed[addr] = e
			p.dialMu.Unlock()
			e.sess, e.id, e.err = p.dialSession(ctx, addr)
			close(e.ready)
			if e.err != nil {
				p.dialMu.Lock()
				if p.dialed[addr] == e {
					delete(p.dialed, addr)
				}
				p.dialMu.Unlock()
			}
			return e.sess, e.err
		}
		p.dialMu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.err != nil {
			return nil, e.err
		}
		if !e.sess.IsClosed() {
			return e.sess, nil
		}
		p.dialMu.Lock()
		if p.dialed[addr] == e {
			delete(p.dialed, addr)
		}
		p.dialMu.Unlock()
	}
}

// dialSession dials addr and runs the hello; it returns the session and
// the peer's proven node id.
func (p *Port) dialSession(ctx context.Context, addr string) (*yamux.Session, string, error) {
	c, certID, err := p.dialConn(ctx, addr)
	if err != nil {
		return nil, "", err
	}
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	} else {
		c.SetDeadline(time.Now().Add(p.handshake))
	}
	id, err := p.clientHello(c, certID)
	if err != nil {
		c.Close()
		return nil, "", err
	}
	c.SetDeadline(time.Time{})
	sess, err := yamux.Client(c, p.muxConf)
	if err != nil {
		c.Close()
		return nil, "", fmt.Errorf("start a session with %s: %w", addr, err)
	}
	select {
	case <-p.closed:
		sess.Close()
		return nil, "", net.ErrClosed
	default:
	}
	p.sessions.Add(1)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		<-sess.CloseChan()
		p.sessions.Add(-1)
	}()
	return sess, id, nil
}

// dialConn connects to addr, under peer TLS with a handshake, and
// returns the connection and the node id of the server's certificate
// ("" in plaintext).
func (p *Port) dialConn(ctx context.Context, addr string) (net.Conn, string, error) {
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, "", err
	}
	if p.peerTLS == nil {
		return raw, "", nil
	}
	return p.peerTLS.Handshake(ctx, raw, addr)
}

// closeDialed closes every session this node dialed.
func (p *Port) closeDialed() {
	p.dialMu.Lock()
	entries := make([]*dialEntry, 0, len(p.dialed))
	for _, e := range p.dialed {
		entries = append(entries, e)
	}
	p.dialMu.Unlock()
	for _, e := range entries {
		<-e.ready
		if e.sess != nil {
			e.sess.Close()
		}
	}
}

// legacy reports whether addr is to be dialed with the previous framing
// now.
func (p *Port) legacy(addr string) bool {
	p.dialMu.Lock()
	defer p.dialMu.Unlock()
	until, ok := p.legacyUntil[addr]
	if ok && time.Now().After(until) {
		delete(p.legacyUntil, addr)
		return false
	}
	return ok
}

// dial opens a Raft connection of group gid to addr: a stream of the
// session to addr, or, to a build of the previous framing and while this
// node holds no cluster secret, a connection of that framing (group 0
// only).
func (p *Port) dial(ctx context.Context, addr string, gid uint64) (net.Conn, error) {
	fallback := gid == 0 && !p.strict()
	if fallback && p.legacy(addr) {
		c, _, err := p.dialConn(ctx, addr)
		return c, err
	}
	sess, err := p.session(ctx, addr)
	if errors.Is(err, errOldPeer) && fallback {
		p.dialMu.Lock()
		p.legacyUntil[addr] = time.Now().Add(legacyRetry)
		p.dialMu.Unlock()
		p.logger.Info("raft port: the peer speaks the previous framing; dialing it so", "addr", addr, "for", legacyRetry)
		c, _, err := p.dialConn(ctx, addr)
		return c, err
	}
	if err != nil {
		return nil, fmt.Errorf("raft session to %s: %w", addr, err)
	}
	st, err := sess.OpenStream()
	if err != nil {
		return nil, fmt.Errorf("raft stream to %s: %w", addr, err)
	}
	var gidb [8]byte
	binary.BigEndian.PutUint64(gidb[:], gid)
	if _, err := st.Write(gidb[:]); err != nil {
		st.Close()
		return nil, fmt.Errorf("raft stream to %s: %w", addr, err)
	}
	return st, nil
}

// CheckNode runs a hello with the Raft port at addr on a connection of
// its own and returns the node id the peer proved (its certificate's,
// or the one the cluster secret proved; "" when neither did). A peer of
// the previous framing, while this node holds no secret, passes with
// "". Membership calls it on a joining node's Raft address.
func (p *Port) CheckNode(ctx context.Context, addr string) (string, error) {
	c, certID, err := p.dialConn(ctx, addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
	id, err := p.clientHello(c, certID)
	if errors.Is(err, errOldPeer) && !p.strict() {
		return certID, nil
	}
	return id, err
}

// Group returns the layer of Raft group id, the raft.StreamLayer under
// its transport, making it on first use. Group 0 also takes the
// connections of the previous framing.
func (p *Port) Group(id uint64) *Layer {
	p.groupsMu.Lock()
	defer p.groupsMu.Unlock()
	if l := p.groups[id]; l != nil {
		return l
	}
	l := &Layer{port: p, id: id, attached: make(chan struct{}), conns: make(chan net.Conn), closed: make(chan struct{})}
	l.dials, l.stopDials = context.WithCancel(p.ctx)
	p.groups[id] = l
	return l
}

// layer returns the attached layer of group id, waiting for it until
// deadline.
func (p *Port) layer(id uint64, deadline time.Time) (*Layer, error) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	l := p.Group(id)
	select {
	case <-l.attached:
		return l, nil
	case <-t.C:
		return nil, fmt.Errorf("no raft group %d here", id)
	case <-p.closed:
		return nil, net.ErrClosed
	}
}

// Layer is one Raft group's side of the port: it implements
// raft.StreamLayer. Attach is called once; Accept returns the group's
// connections once it was.
type Layer struct {
	port *Port
	id   uint64
	// member reports whether a node may open connections of the group;
	// Attach sets it once and then closes attached.
	member    func(id string) bool
	attached  chan struct{}
	conns     chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
	// dials bounds Dial: StopDials and Close cancel it.
	dials     context.Context
	stopDials context.CancelFunc
}

var _ raft.StreamLayer = (*Layer)(nil)

// Attach sets the check of which nodes may open the group's connections:
// member reports whether a proven node id may (replication's
// Node.raftMember: the latest configuration of the group the node
// knows); it must be safe for concurrent use. Connections that arrive
// before wait for it.
func (l *Layer) Attach(member func(id string) bool) {
	l.member = member
	close(l.attached)
}

// deliver hands c to Accept, or closes it once the layer or the port is
// closed.
func (l *Layer) deliver(c net.Conn) {
	// Counted before the hand-over, so the count covers every connection
	// Accept has returned.
	l.port.admitted.Add(1)
	select {
	case l.conns <- c:
	case <-l.closed:
		l.port.admitted.Add(^uint64(0))
		c.Close()
	case <-l.port.closed:
		l.port.admitted.Add(^uint64(0))
		c.Close()
	}
}

// Accept implements net.Listener: it returns the group's next admitted
// connection.
func (l *Layer) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-l.port.closed:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener: the group takes no more connections.
// The port stays open (Port.Close closes it).
func (l *Layer) Close() error {
	l.closeOnce.Do(func() {
		l.stopDials()
		close(l.closed)
		// The group may open here again later (a replica retired, then
		// placed here anew): Group then makes it a new layer.
		l.port.groupsMu.Lock()
		if l.port.groups[l.id] == l {
			delete(l.port.groups, l.id)
		}
		l.port.groupsMu.Unlock()
	})
	return nil
}

// Addr implements net.Listener: the port's address.
func (l *Layer) Addr() net.Addr { return l.port.Addr() }

// redialEvery is how often AwaitPeer dials a peer that refused the
// connection again.
const redialEvery = 50 * time.Millisecond

// Dial implements raft.StreamLayer: a connection of the group to the
// node at addr.
func (l *Layer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(l.dials, timeout)
	defer cancel()
	return l.port.dial(ctx, string(addr), l.id)
}

// AwaitPeer waits, after a call to addr failed because the peer refused
// the connection (its process is down), until the peer takes a session
// again, for at most timeout or until StopDials. It reports whether the
// peer is reachable again.
func (l *Layer) AwaitPeer(addr raft.ServerAddress, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(l.dials, timeout)
	defer cancel()
	for {
		_, err := l.port.session(ctx, string(addr))
		if err == nil {
			return true
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return false
		}
		t := time.NewTimer(redialEvery)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}

// StopDials ends every Dial and AwaitPeer in progress, and later ones
// at once: the group's Raft is shutting down, and waits for its calls.
func (l *Layer) StopDials() { l.stopDials() }

// isReset reports whether err is a connection reset by the peer, which a
// read may see instead of EOF when the server closed with unread data.
func isReset(err error) bool {
	return err != nil && (errors.Is(err, net.ErrClosed) || bytes.Contains([]byte(err.Error()), []byte("connection reset")))
}
