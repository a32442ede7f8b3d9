package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/replication/replicationtest"
)

// dropProxy sits between clients and a Kafka listener and drops the
// reply to the first Produce that passes through it: it cuts that
// connection instead of forwarding the reply, after the listener has
// appended the batch, so the client cannot know whether it was written
// and must send it again.
type dropProxy struct {
	ln       net.Listener
	upstream string
	// dropped is set once a Produce reply was dropped.
	dropped atomic.Bool
	wg      sync.WaitGroup

	mu sync.Mutex
	// conns are the open connections, both sides; guarded by mu.
	conns map[net.Conn]struct{}
}

// startDropProxy serves ln, forwarding to upstream, until the test ends.
func startDropProxy(t testing.TB, ln net.Listener, upstream string) *dropProxy {
	p := &dropProxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *dropProxy) accept() {
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
func (p *dropProxy) track(cs ...net.Conn) bool {
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

func (p *dropProxy) close() {
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

// readFrameFrom reads one size-prefixed frame, the prefix included.
func readFrameFrom(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 8 || n > 64<<20 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	buf := make([]byte, 4+n)
	copy(buf, size[:])
	_, err := io.ReadFull(r, buf[4:])
	return buf, err
}

// requests forwards the client's requests, noting each one's key.
func (p *dropProxy) requests(c, u net.Conn, keys *corrKeys) {
	defer p.wg.Done()
	defer c.Close()
	defer u.Close()
	for {
		f, err := readFrameFrom(c)
		if err != nil {
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
func (p *dropProxy) replies(u, c net.Conn, keys *corrKeys) {
	defer p.wg.Done()
	defer c.Close()
	defer u.Close()
	for {
		f, err := readFrameFrom(u)
		if err != nil {
			return
		}
		corr := int32(binary.BigEndian.Uint32(f[4:]))
		keys.mu.Lock()
		key := keys.m[corr]
		delete(keys.m, corr)
		keys.mu.Unlock()
		if key == keyProduce && p.dropped.CompareAndSwap(false, true) {
			return // the connection is cut with the reply unsent
		}
		if _, err := c.Write(f); err != nil {
			return
		}
	}
}

// TestKgoIdempotentDroppedReply: kgo with its default settings (an
// idempotent producer, acks=all) produces keyed records one at a time
// through a proxy that drops the reply to the first Produce, so kgo
// certainly sends that batch again: with idempotence every record is in
// the log once, in order, the retry answered with the original offset.
// The same run with idempotence off, in the client or in the broker (a
// cluster below the producers' feature level), shows the duplicate the
// retry makes, which is what the first run's check would catch.
func TestKgoIdempotentDroppedReply(t *testing.T) {
	const records = 20
	for _, tc := range []struct {
		name string
		// client turns kgo's idempotence off; brokerLevel runs the node
		// below the producers' feature level (0: its build's), where kgo
		// finds no InitProducerId and produces without a producer id.
		client      bool
		brokerLevel backend.FeatureLevel
		idempotent  bool
	}{
		{name: "idempotent", idempotent: true},
		{name: "idempotence off in the client", client: true},
		{name: "idempotence off in the broker", brokerLevel: 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			tn := startNodeWith(t, replicationtest.Options{FeatureLevel: tc.brokerLevel}, func(o *Options) { o.Advertise = ln.Addr().String() })
			tn.createTopic("drop", 1, nil)
			p := startDropProxy(t, ln, tn.addr)
			// kgo's defaults but for a quicker metadata refresh, which it
			// waits for before it sends the batch again.
			opts := []kgo.Opt{kgo.DefaultProduceTopic("drop"), kgo.MetadataMinAge(100 * time.Millisecond)}
			if tc.client {
				opts = append(opts, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()))
			}
			cl := newKgo(t, ln.Addr().String(), opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for i := range records {
				v := fmt.Sprintf("v%02d", i)
				if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
					t.Fatalf("produce %s: %v", v, err)
				}
			}
			if !p.dropped.Load() {
				t.Fatal("no Produce reply was dropped")
			}
			rr, err := tn.backend.Read("drop", 0, 0, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if info, err := batch.Peek(rr.Batches); err != nil || (info.ProducerID >= 0) != tc.idempotent {
				t.Fatalf("first batch's producer id %d (%v); idempotent %v", info.ProducerID, err, tc.idempotent)
			}
			got := batchValues(t, rr.Batches, 0)
			want := make([]string, 0, records+1)
			if !tc.idempotent {
				want = append(want, "v00") // the retry of the dropped reply's batch
			}
			for i := range records {
				want = append(want, fmt.Sprintf("v%02d", i))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("log holds %q\nwant %q", got, want)
			}
		})
	}
}
