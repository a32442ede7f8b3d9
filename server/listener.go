package server

import (
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ConnLimits bounds the connections a listener keeps open (see
// Server.Listener). cmd/logd sets Max below the process's open-file limit,
// with a reserve for segment files, Raft and its store, so that no number
// of sockets can make a segment roll fail for want of a file descriptor.
type ConnLimits struct {
	// Max bounds the open connections, of every listener Server.Listener
	// wraps together. At the bound, Accept waits for one to close: new
	// connections (all but one per listener) queue in the kernel's accept
	// backlog, which holds no file descriptor of the process, and are
	// served in turn (the request limits cut slow ones). 0: unbounded.
	Max int
	// MaxPerAddr bounds the open connections from one remote IP address
	// (to the listeners of the pool together): a connection past it is
	// closed as soon as it is accepted, so one address cannot take all of
	// Max. 0: unbounded.
	MaxPerAddr int
	// LogEvery is the least time between two log lines about the same
	// bound of one listener (default 10 s); the line counts the events
	// since the previous one.
	LogEvery time.Duration
}

// connMetrics are the listeners' connection metrics, by listener name.
type connMetrics struct {
	open    *prometheus.GaugeVec
	limit   *prometheus.GaugeVec
	waits   *prometheus.CounterVec
	refused *prometheus.CounterVec
}

func newConnMetrics(reg *prometheus.Registry) *connMetrics {
	m := &connMetrics{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "logd_connections_open", Help: "Connections open on the listener.",
		}, []string{"listener"}),
		limit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "logd_connections_limit", Help: "The listener's connection cap (0: unbounded).",
		}, []string{"listener"}),
		waits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "logd_connection_limit_waits_total", Help: "Times the listener stopped accepting because its connection cap was reached.",
		}, []string{"listener"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "logd_connections_refused_total", Help: "Connections closed at once because their remote address had reached its cap.",
		}, []string{"listener"}),
	}
	reg.MustRegister(m.open, m.limit, m.waits, m.refused)
	return m
}

// Listener returns ln under the server's connection limits
// (Options.Conns); name labels its metrics and log lines. Closing it
// closes ln and ends an Accept that waits for a free slot.
//
// Every listener it wraps shares one pool of Options.Conns: the API's and
// the Kafka listener's connections count against one Max and one
// MaxPerAddr together, so neither sits on half of them idle.
func (s *Server) Listener(ln net.Listener, name string) net.Listener {
	s.poolOnce.Do(func() { s.pool = newConnPool(s.conns) })
	return s.listener(ln, name, s.conns, s.pool)
}

// ListenerWith is Listener under limits l, in a pool of its own, instead
// of Options.Conns (the peer listener's, which peers alone use).
func (s *Server) ListenerWith(ln net.Listener, name string, l ConnLimits) net.Listener {
	return s.listener(ln, name, l, newConnPool(l))
}

func (s *Server) listener(ln net.Listener, name string, l ConnLimits, pool *connPool) net.Listener {
	if l.LogEvery <= 0 {
		l.LogEvery = 10 * time.Second
	}
	ll := &limitListener{
		Listener: ln, l: l, name: name, logger: s.logger, pool: pool,
		done:    make(chan struct{}),
		open:    s.connMetrics.open.WithLabelValues(name),
		waits:   s.connMetrics.waits.WithLabelValues(name),
		refused: s.connMetrics.refused.WithLabelValues(name),
	}
	s.connMetrics.limit.WithLabelValues(name).Set(float64(max(l.Max, 0)))
	return ll
}

// connPool is the connections of the listeners that share limits: a
// slot per open connection, and the count per remote address.
type connPool struct {
	slots chan struct{} // one token per open connection; nil: unbounded

	mu      sync.Mutex
	perAddr map[string]int // open connections by remote IP; guarded by mu
}

func newConnPool(l ConnLimits) *connPool {
	p := &connPool{perAddr: map[string]int{}}
	if l.Max > 0 {
		p.slots = make(chan struct{}, l.Max)
	}
	return p
}

// limitListener is a listener under ConnLimits.
type limitListener struct {
	net.Listener
	l       ConnLimits
	name    string
	logger  *slog.Logger
	pool    *connPool     // shared with the listeners of the same limits
	done    chan struct{} // closed by Close
	closing sync.Once

	open           prometheus.Gauge
	waits, refused prometheus.Counter

	mu      sync.Mutex
	fullLog rateLog // guarded by mu
	addrLog rateLog // guarded by mu
}

// rateLog decides when a repeated event is logged again, and counts the
// events in between.
type rateLog struct {
	last   time.Time
	missed int
}

// due counts an event and reports whether to log it now, with how many
// events it stands for.
func (r *rateLog) due(now time.Time, every time.Duration) (int, bool) {
	r.missed++
	if !r.last.IsZero() && now.Sub(r.last) < every {
		return 0, false
	}
	n := r.missed
	r.last, r.missed = now, 0
	return n, true
}

// Accept returns the next connection once the pool is below its cap,
// closing connections from addresses at theirs. A connection accepted
// while the pool is full waits here, in this one, for a slot; the next
// ones wait in the kernel's accept backlog. (Taking the slot before
// accepting would keep the backlog alone waiting, but listeners sharing a
// pool would each hold a slot while idle.)
func (ll *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		if !ll.admit(ip) {
			c.Close()
			continue
		}
		if !ll.acquire() {
			c.Close()
			ll.dropAddr(ip)
			return nil, net.ErrClosed
		}
		ll.open.Inc()
		return &limitConn{Conn: c, ll: ll, ip: ip}, nil
	}
}

// acquire takes a connection slot, waiting while none is free.
func (ll *limitListener) acquire() bool {
	if ll.pool.slots == nil {
		return true
	}
	select {
	case ll.pool.slots <- struct{}{}:
		return true
	case <-ll.done:
		return false
	default:
	}
	ll.waits.Inc()
	ll.mu.Lock()
	n, log := ll.fullLog.due(time.Now(), ll.l.LogEvery)
	ll.mu.Unlock()
	if log {
		ll.logger.Warn("connection limit reached: new connections wait in the accept queue until one closes",
			"listener", ll.name, "limit", ll.l.Max, "waits_since_last_report", n,
			"setting", "--max-connections (below the open-file limit, less --fd-reserve)")
	}
	select {
	case ll.pool.slots <- struct{}{}:
		return true
	case <-ll.done:
		return false
	}
}

func (ll *limitListener) releaseSlot() {
	if ll.pool.slots != nil {
		<-ll.pool.slots
	}
}

// admit counts a connection from ip, unless ip is at its cap.
func (ll *limitListener) admit(ip string) bool {
	p := ll.pool
	p.mu.Lock()
	open := p.perAddr[ip]
	full := ll.l.MaxPerAddr > 0 && open >= ll.l.MaxPerAddr
	if !full {
		p.perAddr[ip]++
	}
	p.mu.Unlock()
	if !full {
		return true
	}
	ll.refused.Inc()
	ll.mu.Lock()
	n, log := ll.addrLog.due(time.Now(), ll.l.LogEvery)
	ll.mu.Unlock()
	if log {
		ll.logger.Warn("per-address connection limit reached: closing new connections from the address",
			"listener", ll.name, "addr", ip, "open", open, "limit", ll.l.MaxPerAddr, "closed_since_last_report", n,
			"setting", "--max-connections-per-ip")
	}
	return false
}

// dropAddr uncounts a connection from ip.
func (ll *limitListener) dropAddr(ip string) {
	p := ll.pool
	p.mu.Lock()
	if p.perAddr[ip]--; p.perAddr[ip] <= 0 {
		delete(p.perAddr, ip)
	}
	p.mu.Unlock()
}

func (ll *limitListener) forget(ip string) {
	ll.dropAddr(ip)
	ll.open.Dec()
	ll.releaseSlot()
}

// Close closes the listener and wakes an Accept waiting for a slot.
func (ll *limitListener) Close() error {
	ll.closing.Do(func() { close(ll.done) })
	return ll.Listener.Close()
}

// remoteIP is the connection's remote IP address without its port.
func remoteIP(c net.Conn) string {
	addr := c.RemoteAddr()
	if ta, ok := addr.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	if host, _, err := net.SplitHostPort(addr.String()); err == nil {
		return host
	}
	return addr.String()
}

// limitConn gives its slot back when closed (once).
type limitConn struct {
	net.Conn
	ll      *limitListener
	ip      string
	closing sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.closing.Do(func() { c.ll.forget(c.ip) })
	return err
}
