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
	// Max bounds the open connections. At the bound, Accept waits for one
	// to close: new connections queue in the kernel's accept backlog,
	// which holds no file descriptor of the process, and are served in
	// turn (the request limits cut slow ones). 0: unbounded.
	Max int
	// MaxPerAddr bounds the open connections from one remote IP address:
	// a connection past it is closed as soon as it is accepted, so one
	// address cannot take all of Max. 0: unbounded.
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
func (s *Server) Listener(ln net.Listener, name string) net.Listener {
	return s.ListenerWith(ln, name, s.conns)
}

// ListenerWith is Listener under limits l instead of Options.Conns (the
// peer listener's, which peers alone use).
func (s *Server) ListenerWith(ln net.Listener, name string, l ConnLimits) net.Listener {
	if l.LogEvery <= 0 {
		l.LogEvery = 10 * time.Second
	}
	ll := &limitListener{
		Listener: ln, l: l, name: name, logger: s.logger,
		done:    make(chan struct{}),
		perAddr: map[string]int{},
		open:    s.connMetrics.open.WithLabelValues(name),
		waits:   s.connMetrics.waits.WithLabelValues(name),
		refused: s.connMetrics.refused.WithLabelValues(name),
	}
	if l.Max > 0 {
		ll.slots = make(chan struct{}, l.Max)
	}
	s.connMetrics.limit.WithLabelValues(name).Set(float64(max(l.Max, 0)))
	return ll
}

// limitListener is a listener under ConnLimits.
type limitListener struct {
	net.Listener
	l       ConnLimits
	name    string
	logger  *slog.Logger
	slots   chan struct{} // one token per open connection; nil: unbounded
	done    chan struct{} // closed by Close
	closing sync.Once

	open           prometheus.Gauge
	waits, refused prometheus.Counter

	mu      sync.Mutex
	perAddr map[string]int // open connections by remote IP; guarded by mu
	fullLog rateLog        // guarded by mu
	addrLog rateLog        // guarded by mu
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

// Accept returns the next connection once the listener is below its cap,
// closing connections from addresses at theirs.
func (ll *limitListener) Accept() (net.Conn, error) {
	for {
		if !ll.acquire() {
			return nil, net.ErrClosed
		}
		c, err := ll.Listener.Accept()
		if err != nil {
			ll.releaseSlot()
			return nil, err
		}
		ip := remoteIP(c)
		if !ll.admit(ip) {
			c.Close()
			ll.releaseSlot()
			continue
		}
		ll.open.Inc()
		return &limitConn{Conn: c, ll: ll, ip: ip}, nil
	}
}

// acquire takes a connection slot, waiting while none is free.
func (ll *limitListener) acquire() bool {
	if ll.slots == nil {
		return true
	}
	select {
	case ll.slots <- struct{}{}:
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
	case ll.slots <- struct{}{}:
		return true
	case <-ll.done:
		return false
	}
}

func (ll *limitListener) releaseSlot() {
	if ll.slots != nil {
		<-ll.slots
	}
}

// admit counts a connection from ip, unless ip is at its cap.
func (ll *limitListener) admit(ip string) bool {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if ll.l.MaxPerAddr > 0 && ll.perAddr[ip] >= ll.l.MaxPerAddr {
		ll.refused.Inc()
		if n, log := ll.addrLog.due(time.Now(), ll.l.LogEvery); log {
			ll.logger.Warn("per-address connection limit reached: closing new connections from the address",
				"listener", ll.name, "addr", ip, "open", ll.perAddr[ip], "limit", ll.l.MaxPerAddr, "closed_since_last_report", n,
				"setting", "--max-connections-per-ip")
		}
		return false
	}
	ll.perAddr[ip]++
	return true
}

func (ll *limitListener) forget(ip string) {
	ll.mu.Lock()
	if ll.perAddr[ip]--; ll.perAddr[ip] <= 0 {
		delete(ll.perAddr, ip)
	}
	ll.mu.Unlock()
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
