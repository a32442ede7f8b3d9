package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/replicationtest"
)

// Idempotent producers at the protocol level (docs/kafka.md, "Idempotent
// producers"): raw kmsg requests against a real node, each batch built
// with the producer id, epoch and sequence a client would give it.

// producerBatch returns a batch of values from producer id at epoch,
// first sequence seq.
func producerBatch(t testing.TB, id int64, epoch int16, seq int32, values ...string) []byte {
	t.Helper()
	b := records(t, values...)
	binary.BigEndian.PutUint64(b[43:], uint64(id))
	binary.BigEndian.PutUint16(b[51:], uint16(epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// initProducerID asks for a producer id and fails the test unless one
// comes, epoch 0.
func initProducerID(t testing.TB, c *rawClient) int64 {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.ProducerID, req.ProducerEpoch = -1, -1
	resp := c.do(req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 || resp.ProducerID < 0 || resp.ProducerEpoch != 0 {
		t.Fatalf("InitProducerId: code %d, id %d, epoch %d", resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch)
	}
	return resp.ProducerID
}

// seqStep is one produce of a sequence script: a batch of n records from
// the script's producer, and the code and base offset it must get
// (-1 when refused).
type seqStep struct {
	name  string
	part  int32
	epoch int16
	seq   int32
	n     int
	code  int16
	base  int64
}

// runSeq produces each step's batch to topic and checks its answer.
func runSeq(t *testing.T, c *rawClient, topic string, id int64, steps []seqStep) {
	t.Helper()
	for _, s := range steps {
		vals := make([]string, s.n)
		for i := range vals {
			vals[i] = s.name
		}
		code, base := produceCode(t, c.do(produceReq(9, -1, topic, s.part, producerBatch(t, id, s.epoch, s.seq, vals...))))
		if code != s.code || base != s.base {
			t.Fatalf("%s: %s at %d; want %s at %d", s.name, errorName(code), base, errorName(s.code), s.base)
		}
	}
}

// endOffset is a partition's end offset.
func (tn *testNode) endOffset(topic string, p int32) int64 {
	tn.t.Helper()
	off, err := tn.backend.Offsets(topic, p)
	if err != nil {
		tn.t.Fatal(err)
	}
	return off.End
}

// TestIdempotentSequences: Kafka's rules for an idempotent producer's
// batches, each edge at the protocol level: in order, a gap, a duplicate
// of each of the last five batches (answered with its original offset,
// nothing written), one older than five, a batch that overlaps the last
// one, an epoch bump (from 0 only), a fenced epoch, partitions judged
// apart in one request, and, a day later by the node's clock, a producer
// the partition forgot, which is taken at any sequence as Kafka takes it.
func TestIdempotentSequences(t *testing.T) {
	// The node's clock runs ahead of the wall clock by skew.
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	tn := startNodeWith(t, replicationtest.Options{Now: now})
	tn.createTopic("idem", 2, nil)
	c := dial(t, tn.addr)
	id := initProducerID(t, c)
	if again := initProducerID(t, c); again == id {
		t.Fatalf("InitProducerId handed out %d twice", id)
	}
	steps := []seqStep{
		{name: "first", seq: 0, n: 2, base: 0},
		{name: "b1", seq: 2, n: 1, base: 2},
		{name: "b2", seq: 3, n: 2, base: 3},
		{name: "b3", seq: 5, n: 1, base: 5},
		{name: "b4", seq: 6, n: 1, base: 6},
		{name: "gap", seq: 8, n: 1, code: errOutOfOrderSequence, base: -1},
		{name: "b5", seq: 7, n: 1, base: 7},
		{name: "dup b1", seq: 2, n: 1, base: 2},
		{name: "dup b2", seq: 3, n: 2, base: 3},
		{name: "dup b3", seq: 5, n: 1, base: 5},
		{name: "dup b4", seq: 6, n: 1, base: 6},
		{name: "dup b5", seq: 7, n: 1, base: 7},
		{name: "older than five", seq: 0, n: 2, code: errOutOfOrderSequence, base: -1},
		{name: "overlapping b5", seq: 7, n: 2, code: errOutOfOrderSequence, base: -1},
		{name: "new epoch not at 0", epoch: 1, seq: 8, n: 1, code: errOutOfOrderSequence, base: -1},
		{name: "new epoch", epoch: 1, seq: 0, n: 1, base: 8},
		{name: "fenced epoch", epoch: 0, seq: 8, n: 1, code: errInvalidProducerEpoch, base: -1},
		{name: "dup in the new epoch", epoch: 1, seq: 0, n: 1, base: 8},
		{name: "other partition", part: 1, epoch: 1, seq: 40, n: 1, base: 0},
	}
	runSeq(t, c, "idem", id, steps)
	if end := tn.endOffset("idem", 0); end != 9 {
		t.Fatalf("partition 0 ends at %d, want 9: a refused or duplicate batch was written", end)
	}

	// One request, two partitions: the refused one alone is refused.
	req := produceReq(9, -1, "idem", 0, producerBatch(t, id, 1, 5, "gap"))
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 1, producerBatch(t, id, 1, 41, "next")
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	resp := c.do(req).(*kmsg.ProduceResponse)
	if p := resp.Topics[0].Partitions; p[0].ErrorCode != errOutOfOrderSequence || p[1].ErrorCode != 0 || p[1].BaseOffset != 1 {
		t.Fatalf("mixed request: %+v", p)
	}

	// A day later by the node's clock the producer is forgotten: its next
	// batch is taken at any sequence, a retry of its last one appended
	// again (Kafka answers alike once it expired the producer).
	skew.Add(int64(25 * time.Hour))
	runSeq(t, c, "idem", id, []seqStep{
		{name: "retry after expiry", epoch: 1, seq: 0, n: 1, base: 9},
		{name: "then in order", epoch: 1, seq: 1, n: 1, base: 10},
		{name: "and a gap refused again", epoch: 1, seq: 5, n: 1, code: errOutOfOrderSequence, base: -1},
	})
}

// TestIdempotentBelowFeatureLevel: a cluster below the producers' feature
// level does not list InitProducerId, answers it UNSUPPORTED_VERSION if
// sent anyway, and refuses a batch with a producer id as before; a node
// that does not lead answers COORDINATOR_LOAD_IN_PROGRESS, and a
// transactional id is INVALID_REQUEST.
func TestIdempotentBelowFeatureLevel(t *testing.T) {
	tn := startNodeWith(t, replicationtest.Options{FeatureLevel: 9})
	tn.createTopic("old", 1, nil)
	c := dial(t, tn.addr)
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	for _, k := range c.do(av).(*kmsg.ApiVersionsResponse).ApiKeys {
		if k.ApiKey == keyInitProducerID {
			t.Fatal("InitProducerId advertised below its feature level")
		}
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	if code := c.do(req).(*kmsg.InitProducerIDResponse).ErrorCode; code != errUnsupportedVersion {
		t.Fatalf("InitProducerId below the level: %s", errorName(code))
	}
	if code, _ := produceCode(t, c.do(produceReq(9, -1, "old", 0, producerBatch(t, 7, 0, 0, "x")))); code != errInvalidRecord {
		t.Fatalf("batch with a producer id below the level: %s", errorName(code))
	}
	// On a node that does not lead: a code every client retries as is.
	fl := startNode(t, func(o *Options) { o.Backend = follower{o.Backend} })
	if code := dial(t, fl.addr).do(req).(*kmsg.InitProducerIDResponse).ErrorCode; code != errCoordinatorLoadInProgress {
		t.Fatalf("InitProducerId on a follower: %s", errorName(code))
	}
	// With a Forwarder the leader hands the id out: librdkafka asks one
	// broker again and again, and would never get one from a node that
	// only refused.
	fw := &idForwarder{id: 42}
	ff := startNode(t, func(o *Options) { o.Backend, o.Forward = follower{o.Backend}, fw })
	if r := dial(t, ff.addr).do(req).(*kmsg.InitProducerIDResponse); r.ErrorCode != 0 || r.ProducerID != 42 || r.ProducerEpoch != 0 {
		t.Fatalf("InitProducerId on a follower with a Forwarder: %s, id %d epoch %d; want the leader's id 42", errorName(r.ErrorCode), r.ProducerID, r.ProducerEpoch)
	}
	if fw.calls.Load() != 1 {
		t.Fatalf("%d calls forwarded, want 1", fw.calls.Load())
	}
	txn := kmsg.NewPtrInitProducerIDRequest()
	txn.SetVersion(4)
	txnID := "t"
	txn.TransactionalID = &txnID
	tn2 := startNode(t)
	if code := dial(t, tn2.addr).do(txn).(*kmsg.InitProducerIDResponse).ErrorCode; code != errInvalidRequest {
		t.Fatalf("InitProducerId with a transactional id: %s", errorName(code))
	}
}

// kafkaOn serves a Kafka listener over b on 127.0.0.1 until the returned
// stop, which joins it.
func kafkaOn(t testing.TB, b backend.Kafka) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{Backend: b, Advertise: ln.Addr().String(), Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	return ln.Addr().String(), func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close kafka server: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	}
}

// TestIdempotentRestart: a node restarted (its Raft log and snapshot on
// disk) between batches keeps every partition's producer state: the
// batches before its snapshot come back from the snapshot, those after
// from the replayed log; duplicates of both are answered with their
// original offsets, and the sequence goes on where it stood.
func TestIdempotentRestart(t *testing.T) {
	dir := t.TempDir()
	open := func() *replicationtest.Node {
		n, err := replicationtest.Open(replicationtest.Options{Dir: dir, TCP: true, APIAdvertise: "127.0.0.1:7070",
			Fatal: func(err error) { t.Errorf("node stopped: %v", err) }})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := open()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := n.Backend.CreateTopic(ctx, backend.CreateTopic{Name: "r", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	addr, stop := kafkaOn(t, n.Backend)
	c := dial(t, addr)
	id := initProducerID(t, c)
	runSeq(t, c, "r", id, []seqStep{
		{name: "s0", seq: 0, n: 1, base: 0},
		{name: "s1", seq: 1, n: 1, base: 1},
		{name: "s2", seq: 2, n: 1, base: 2},
	})
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	runSeq(t, c, "r", id, []seqStep{
		{name: "s3", seq: 3, n: 1, base: 3},
		{name: "s4", seq: 4, n: 2, base: 4},
	})
	stop()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n = open()
	defer func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	}()
	addr, stop = kafkaOn(t, n.Backend)
	defer stop()
	c = dial(t, addr)
	runSeq(t, c, "r", id, []seqStep{
		{name: "dup from the snapshot", seq: 1, n: 1, base: 1},
		{name: "dup from the log", seq: 4, n: 2, base: 4},
		{name: "gap", seq: 7, n: 1, code: errOutOfOrderSequence, base: -1},
		{name: "s6", seq: 6, n: 1, base: 6},
	})
	if next := initProducerID(t, c); next <= id {
		t.Fatalf("after the restart InitProducerId handed out %d, not above %d", next, id)
	}
}

// lateBelowProducers is a backend whose cluster gains a member below the
// producers' feature level between the produce's check and its append.
type lateBelowProducers struct {
	backend.Kafka
	checks *atomic.Int32
}

func (b lateBelowProducers) CheckIdempotence() error {
	if b.checks.Add(1) == 1 {
		return nil
	}
	return &backend.FeatureLevelError{Command: "idempotent produce", Need: 10, Cluster: 9}
}

func (b lateBelowProducers) Append(context.Context, backend.Append) ([]int64, error) {
	return nil, &backend.FeatureLevelError{Command: "append", Need: 10, Cluster: 9}
}

// TestIdempotentLevelLostBeforeAppend: a batch with a producer id that
// passed the produce's check, then met a member below the producers'
// feature level at the append, is INVALID_RECORD (as before the check),
// not a codec's refusal.
func TestIdempotentLevelLostBeforeAppend(t *testing.T) {
	var checks atomic.Int32
	tn := startNode(t, func(o *Options) { o.Backend = lateBelowProducers{Kafka: o.Backend, checks: &checks} })
	tn.createTopic("late", 1, nil)
	c := dial(t, tn.addr)
	if code, _ := produceCode(t, c.do(produceReq(9, -1, "late", 0, producerBatch(t, 1, 0, 0, "x")))); code != errInvalidRecord {
		t.Fatalf("producer batch after the level was lost: %s", errorName(code))
	}
}

// idForwarder is a Forwarder whose leader hands out producer id id.
type idForwarder struct {
	Forwarder
	id    int64
	calls atomic.Int32
}

func (f *idForwarder) InitProducerID(context.Context, auth.Principal, string) (int64, int16, error) {
	f.calls.Add(1)
	return f.id, 0, nil
}
