package e2e

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// kafkaProduceKey is the Kafka protocol's request key of Produce.
const kafkaProduceKey = 0

// DropProxy sits between Kafka clients and a Kafka listener and drops the
// reply to the first Produce that passes through it: it cuts that
// connection instead of forwarding the reply, after the listener has
// appended the batch, so the client cannot know whether it was written
// and must send it again. Clients must find the listener at the proxy's
// address, so the listener advertises it (the in-process listener's
// Advertise option, logd's --kafka-advertise).
type DropProxy struct {
	ln       net.Listener
	upstream string
	// dropped is set once a Produce reply was dropped.
	dropped atomic.Bool
	wg      sync.WaitGroup

	mu sync.Mutex
	// conns are the open connections, both sides; nil once closed.
	// Guarded by mu.
	conns map[net.Conn]struct{}
}

// StartDropProxy serves ln, forwarding each connection to a new one to
// upstream, until the test ends; its cleanup closes every connection and
// joins every goroutine it started.
func StartDropProxy(t testing.TB, ln net.Listener, upstream string) *DropProxy {
	t.Helper()
	p := &DropProxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Dropped reports whether the proxy has dropped a Produce reply: a test
// whose client never produced through it proves nothing.
func (p *DropProxy) Dropped() bool { return p.dropped.Load() }

func (p *DropProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.upstream)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, u) {
			return
		}
		keys := &corrKeys{m: map[int32]int16{}}
		p.wg.Add(2)
		go p.requests(c, u, keys)
		go p.replies(u, c, keys)
	}
}

// track adds open connections; false once the proxy is closed.
func (p *DropProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *DropProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// corrKeys maps one connection's correlation ids to their request keys.
type corrKeys struct {
	mu sync.Mutex
	m  map[int32]int16
}

// readKafkaFrame reads one size-prefixed frame, the prefix included.
func readKafkaFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 64<<20 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	buf := make([]byte, 4+n)
	copy(buf, size[:])
	_, err := io.ReadFull(r, buf[4:])
	return buf, err
}

// requests forwards the client's requests, noting each one's key (every
// request header starts with key, version and correlation id).
func (p *DropProxy) requests(c, u net.Conn, keys *corrKeys) {
	defer p.wg.Done()
	defer c.Close()
	defer u.Close()
	for {
		f, err := readKafkaFrame(c)
		if err != nil || len(f) < 12 {
			return
		}
		key, corr := int16(binary.BigEndian.Uint16(f[4:])), int32(binary.BigEndian.Uint32(f[8:]))
		keys.mu.Lock()
		keys.m[corr] = key
		keys.mu.Unlock()
		if _, err := u.Write(f); err != nil {
			return
		}
	}
}

// replies forwards the listener's replies but the first Produce's.
func (p *DropProxy) replies(u, c net.Conn, keys *corrKeys) {
	defer p.wg.Done()
	defer c.Close()
	defer u.Close()
	for {
		f, err := readKafkaFrame(u)
		if err != nil {
			return
		}
		corr := int32(binary.BigEndian.Uint32(f[4:]))
		keys.mu.Lock()
		key, ok := keys.m[corr]
		delete(keys.m, corr)
		keys.mu.Unlock()
		if ok && key == kafkaProduceKey && p.dropped.CompareAndSwap(false, true) {
			return // the connection is cut with the reply unsent
		}
		if _, err := c.Write(f); err != nil {
			return
		}
	}
}
