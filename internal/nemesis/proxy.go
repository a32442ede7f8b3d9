package nemesis

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// CutMode is what a cut link does with connections.
type CutMode int

const (
	// Open forwards traffic.
	Open CutMode = iota
	// Refuse resets every new connection as soon as it is accepted: the
	// dialer sees its connection reset (during or just after its dial),
	// much as from a host that is up with nothing listening.
	Refuse
	// Blackhole accepts new connections and forwards nothing, like a
	// network that drops every packet: the dialer learns only from its
	// own timeouts.
	Blackhole
)

func (m CutMode) String() string {
	switch m {
	case Open:
		return "open"
	case Refuse:
		return "refuse"
	case Blackhole:
		return "blackhole"
	}
	return fmt.Sprintf("CutMode(%d)", int(m))
}

// Link is what a proxy does to the traffic it carries. The zero Link
// forwards everything at once.
type Link struct {
	// Cut, unless Open, closes the connections the link carries (both
	// halves, so each end sees it and reconnects) and treats new ones as
	// the mode says.
	Cut CutMode
	// Loss is the probability that a new connection is dropped at once,
	// and that an established one is dropped at each chunk of bytes it
	// forwards: a lossy network, as a stream protocol sees it.
	Loss float64
	// Latency delays every chunk of bytes; Jitter adds a uniform random
	// delay in [0, Jitter). Chunks keep their order.
	Latency, Jitter time.Duration
}

func (l Link) String() string {
	switch {
	case l.Cut != Open:
		return "cut (" + l.Cut.String() + ")"
	case l.Loss > 0 && l.Latency+l.Jitter > 0:
		return fmt.Sprintf("loss %.2f, latency %v+%v", l.Loss, l.Latency, l.Jitter)
	case l.Loss > 0:
		return fmt.Sprintf("loss %.2f", l.Loss)
	case l.Latency+l.Jitter > 0:
		return fmt.Sprintf("latency %v+%v", l.Latency, l.Jitter)
	}
	return "open"
}

// ProxyStats counts what a proxy did.
type ProxyStats struct {
	// Accepted counts connections accepted; Forwarded those connected to
	// the target.
	Accepted, Forwarded int
	// Refused counts connections closed at once (cut or lost), Dropped
	// established connections closed by a loss.
	Refused, Dropped int
	// Bytes counts bytes delivered, both directions.
	Bytes int64
}

// dialTimeout bounds the proxy's connection to its target.
const dialTimeout = 2 * time.Second

// chunkBytes is the most a proxy reads, delays and forwards at once.
const chunkBytes = 32 << 10

// Proxy forwards TCP connections from its own port on 127.0.0.1 to a
// target address, and cuts, drops or delays them as its Link says. One
// proxy carries one direction of one link: the connections one node dials
// to one peer (and the answers on them). StartProxy starts it; Close stops
// it and joins every goroutine it started.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu sync.Mutex
	// link, rng, conns, stats and closed are guarded by mu.
	link   Link
	rng    *rand.Rand
	conns  map[*proxyConn]struct{}
	stats  ProxyStats
	closed bool
}

// StartProxy listens on 127.0.0.1 (a free port) and forwards to target.
// seed seeds its loss and jitter draws.
func StartProxy(target string, seed uint64) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy to %s: %w", target, err)
	}
	p := &Proxy{target: target, ln: ln, rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address to dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Link returns the proxy's current link.
func (p *Proxy) Link() Link {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.link
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() ProxyStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Set changes the link. Cutting it closes every connection it carries;
// opening it closes the connections a blackhole held (they were never
// connected to the target). Other changes apply to the next chunk.
func (p *Proxy) Set(l Link) {
	p.mu.Lock()
	p.link = l
	var closing []*proxyConn
	for c := range p.conns {
		if l.Cut != Open || c.held {
			closing = append(closing, c)
		}
	}
	p.mu.Unlock()
	for _, c := range closing {
		c.close()
	}
}

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	for _, c := range conns {
		c.close()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		// This goroutine holds a count, so Add cannot race Close's Wait.
		p.wg.Add(1)
		go p.serve(c)
	}
}

// proxyConn is one connection through the proxy.
type proxyConn struct {
	client net.Conn
	done   chan struct{} // closed by close
	// held marks a connection a blackhole accepted; it never changes.
	held bool

	mu sync.Mutex
	// up is the connection to the target once dialed; closed is set by
	// close. Both guarded by mu.
	up     net.Conn
	closed bool
}

// setUp records the target connection; false if the connection was
// closed meanwhile (a cut while dialing), and then up is closed.
func (c *proxyConn) setUp(up net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		up.Close()
		return false
	}
	c.up = up
	return true
}

// close closes both halves, once.
func (c *proxyConn) close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	up := c.up
	c.mu.Unlock()
	close(c.done)
	c.client.Close()
	if up != nil {
		up.Close()
	}
}

// serve runs one accepted connection to its end.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		client.Close()
		return
	}
	p.stats.Accepted++
	link := p.link
	lost := link.Loss > 0 && p.rng.Float64() < link.Loss
	if link.Cut == Refuse || link.Cut == Open && lost {
		p.stats.Refused++
		p.mu.Unlock()
		reset(client)
		return
	}
	c := &proxyConn{client: client, done: make(chan struct{}), held: link.Cut == Blackhole}
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	defer p.forget(c)
	defer c.close()
	if c.held {
		// Read and discard until Set or Close closes it.
		io.Copy(io.Discard, client)
		return
	}
	up, err := net.DialTimeout("tcp", p.target, dialTimeout)
	if err != nil {
		reset(client) // the target is down: so is the link
		return
	}
	if !c.setUp(up) {
		return
	}
	p.mu.Lock()
	p.stats.Forwarded++
	p.mu.Unlock()
	var pipes sync.WaitGroup
	pipes.Add(2)
	go func() { defer pipes.Done(); p.pipe(c, client, up) }()
	go func() { defer pipes.Done(); p.pipe(c, up, client) }()
	pipes.Wait()
}

func (p *Proxy) forget(c *proxyConn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// reset closes a connection so that its peer sees a reset, not a clean
// end of stream.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// chunk is bytes read from one side, due at the other at due.
type chunk struct {
	b   []byte
	due time.Time
}

// pipe forwards src to dst, chunk by chunk, under the link's loss and
// delay. Either end's failure, or a drop, closes the whole connection:
// neither Raft nor HTTP uses half-closed connections, and a peer must
// learn that its connection is gone.
func (p *Proxy) pipe(c *proxyConn, src, dst net.Conn) {
	defer c.close()
	q := make(chan chunk, 64)
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for ch := range q {
			if wait := time.Until(ch.due); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-c.done:
					t.Stop()
					return
				}
			}
			if _, err := dst.Write(ch.b); err != nil {
				c.close()
				return
			}
			p.mu.Lock()
			p.stats.Bytes += int64(len(ch.b))
			p.mu.Unlock()
		}
	}()
	defer func() { close(q); <-wrote }()
	buf := make([]byte, chunkBytes)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			delay, drop := p.draw()
			if drop {
				return
			}
			select {
			case q <- chunk{b: append([]byte(nil), buf[:n]...), due: time.Now().Add(delay)}:
			case <-c.done:
				return
			}
		}
		if err != nil {
			return // either end closed, or the link was cut
		}
	}
}

// draw decides the fate of one chunk: its delay, or a drop of the
// connection (a loss, or a cut that raced the read).
func (p *Proxy) draw() (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.link
	if l.Cut != Open {
		return 0, true
	}
	if l.Loss > 0 && p.rng.Float64() < l.Loss {
		p.stats.Dropped++
		return 0, true
	}
	d := l.Latency
	if l.Jitter > 0 {
		d += time.Duration(p.rng.Int64N(int64(l.Jitter)))
	}
	return d, false
}
