package kafka

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/replication"
	"github.com/logd-dev/logd/replication/replicationtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testNode is a real single-node logd in process (package
// replication/replicationtest) with the Kafka listener on 127.0.0.1:0.
type testNode struct {
	t       testing.TB
	node    *replicationtest.Node
	backend *replication.Backend
	srv     *Server
	reg     *prometheus.Registry
	addr    string
}

// startNode starts a node; opts may change the Kafka options (the backend
// set there, if any, wraps the node's).
func startNode(t testing.TB, opts ...func(*Options)) *testNode {
	t.Helper()
	return startNodeWith(t, replicationtest.Options{}, opts...)
}

// startNodeWith is startNode with the node's options (its clock, its
// feature level).
func startNodeWith(t testing.TB, nopts replicationtest.Options, opts ...func(*Options)) *testNode {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	// Not dialed: the API address other nodes' Kafka addresses derive
	// from.
	nopts.APIAdvertise = "127.0.0.1:7070"
	node := replicationtest.Start(t, nopts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tn := &testNode{t: t, node: node, backend: node.Backend, reg: prometheus.NewRegistry(), addr: ln.Addr().String()}
	o := Options{Backend: tn.backend, Advertise: tn.addr, Registerer: tn.reg, Logger: logger}
	for _, f := range opts {
		f(&o)
	}
	srv, err := New(o)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	tn.srv = srv
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close kafka server: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return tn
}

// createTopic creates a topic through the backend.
func (tn *testNode) createTopic(name string, partitions int32, config map[string]string) {
	tn.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := tn.backend.CreateTopic(ctx, backend.CreateTopic{Name: name, Partitions: partitions, Config: config}); err != nil {
		tn.t.Fatal(err)
	}
}

// rawClient speaks the protocol with kmsg over one connection, for the
// requests and versions a real client would not send.
type rawClient struct {
	t    testing.TB
	conn net.Conn
	br   *bufio.Reader
	corr int32
	f    *kmsg.RequestFormatter
}

func dial(t testing.TB, addr string) *rawClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawClient{t: t, conn: c, br: bufio.NewReader(c), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("logd-test"))}
}

// send writes req and returns its correlation id.
func (c *rawClient) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.conn.Write(c.f.AppendRequest(nil, req, c.corr)); err != nil {
		c.t.Fatalf("write %s: %v", apiName(req.Key()), err)
	}
	return c.corr
}

// readFrame reads one response frame: its correlation id and the rest.
func (c *rawClient) readFrame(timeout time.Duration) (int32, []byte, error) {
	c.conn.SetReadDeadline(time.Now().Add(timeout))
	var size [4]byte
	if _, err := io.ReadFull(c.br, size[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 256<<20 {
		return 0, nil, fmt.Errorf("response size %d", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(c.br, buf); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(buf)), buf[4:], nil
}

// recv reads the response to req (sent with correlation id corr) and
// decodes it at req's version. It checks that the response re-encodes to
// the same bytes, so nothing was left over or misplaced.
func (c *rawClient) recv(req kmsg.Request, corr int32) kmsg.Response {
	c.t.Helper()
	got, body, err := c.readFrame(30 * time.Second)
	if err != nil {
		c.t.Fatalf("read %s v%d response: %v", apiName(req.Key()), req.GetVersion(), err)
	}
	if got != corr {
		c.t.Fatalf("%s: correlation id %d, want %d", apiName(req.Key()), got, corr)
	}
	resp := req.ResponseKind()
	if resp.IsFlexible() && req.Key() != keyApiVersions {
		if len(body) == 0 || body[0] != 0 {
			c.t.Fatalf("%s v%d: response header tags %x, want none", apiName(req.Key()), req.GetVersion(), body[:min(len(body), 1)])
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("decode %s v%d response: %v", apiName(req.Key()), req.GetVersion(), err)
	}
	if again := resp.AppendTo(nil); string(again) != string(body) {
		c.t.Fatalf("%s v%d: response does not re-encode to its bytes:\n got %x\nsent %x", apiName(req.Key()), req.GetVersion(), again, body)
	}
	return resp
}

// do sends req and returns its response.
func (c *rawClient) do(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	return c.recv(req, c.send(req))
}

// expectClosed checks that the server closed the connection without
// answering.
func (c *rawClient) expectClosed() {
	c.t.Helper()
	_, _, err := c.readFrame(10 * time.Second)
	if err == nil {
		c.t.Fatal("server answered; want the connection closed")
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		c.t.Fatal("connection still open after 10s; want it closed")
	}
}

// records builds an uncompressed batch of values, each its own key (so
// that compacted topics take it).
func records(t testing.TB, values ...string) []byte {
	t.Helper()
	recs := make([]batch.Record, len(values))
	for i, v := range values {
		recs[i] = batch.Record{Timestamp: time.Now().UnixMilli(), Key: []byte(v), Value: []byte(v)}
	}
	b, err := batch.Build(recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// produceReq builds a produce request of one batch to topic-partition.
func produceReq(version int16, acks int16, topic string, partition int32, b []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.Acks = acks
	req.TimeoutMillis = 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, b
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// fetchReq builds a fetch of one partition.
func fetchReq(version int16, topic string, partition int32, offset int64, maxWaitMs, minBytes, maxBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWaitMs, minBytes, maxBytes
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// produceCode returns the single partition's code and base offset.
func produceCode(t testing.TB, resp kmsg.Response) (int16, int64) {
	t.Helper()
	r := resp.(*kmsg.ProduceResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("produce response shape: %+v", r)
	}
	p := r.Topics[0].Partitions[0]
	return p.ErrorCode, p.BaseOffset
}

// fetchPartition returns the single partition of a fetch response.
func fetchPart(t testing.TB, resp kmsg.Response) kmsg.FetchResponseTopicPartition {
	t.Helper()
	r := resp.(*kmsg.FetchResponse)
	if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch response shape: error %d, %d topics", r.ErrorCode, len(r.Topics))
	}
	p := r.Topics[0].Partitions[0]
	if p.RecordBatches == nil {
		// librdkafka fails on a null record set ("invalid MessageSetSize
		// -1"); Kafka sends an empty one.
		t.Fatal("fetch answered a null record set")
	}
	return p
}

// batchValues decodes the values of the records of fetched batches at or
// above from.
func batchValues(t testing.TB, b []byte, from int64) []string {
	t.Helper()
	recs, err := batch.Records(b, from, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}
