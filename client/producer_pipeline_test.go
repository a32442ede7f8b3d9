package client_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
)

// Tests of the Producer's pipeline: several numbered batches in flight per
// partition against a real node, with faults between the client and the
// node injected by faultTransport.

// fault is what faultTransport does to one Produce call.
type fault int

const (
	// passes: the call goes through untouched.
	passes fault = iota
	// loseAnswer: the node handles the call, and its answer is lost on
	// the way back, as when a connection breaks after the request was
	// read: the client cannot know whether it was written.
	loseAnswer
	// overtaken: the call is held until a Produce call sent after it has
	// been answered (at most overtakeHold: there may be none), so the one
	// after it reaches the node first.
	overtaken
)

// overtakeHold bounds the hold of an overtaken call: longer than the
// node's hold for the batch before (replication's orderWait, 50 ms), so
// an overtaking batch is refused as out of order.
const overtakeHold = 200 * time.Millisecond

// faultTransport is an http.RoundTripper between a client and a node that
// injects faults into Produce calls, chosen by their number in the order
// the client sends them (from 1), and counts what it saw.
type faultTransport struct {
	next  http.RoundTripper
	fault func(n int) fault
	// strip removes the producer identity from every Produce request, as
	// a server of a build before it ignores it.
	strip bool

	mu sync.Mutex
	// Guarded by mu:
	sent      int
	inFlight  int
	maxFlight int
	refused   int             // answers other than 200: the node refused the call
	faulted   map[string]bool // the batches faulted, by their first value
	answered  chan struct{}   // closed and replaced when a Produce call is answered
	latest    int             // the latest call (by number) answered so far
}

func newFaultTransport(fault func(n int) fault) *faultTransport {
	return &faultTransport{next: http.DefaultTransport, fault: fault, answered: make(chan struct{}), faulted: map[string]bool{}}
}

func (ft *faultTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(req.URL.Path, "/Produce") {
		return ft.next.RoundTrip(req)
	}
	if ft.strip {
		if err := stripProducer(req); err != nil {
			return nil, err
		}
	}
	first, err := firstValue(req)
	if err != nil {
		return nil, err
	}
	ft.mu.Lock()
	ft.sent++
	f := passes
	if ft.fault != nil && !ft.faulted[first] {
		// Each batch at most once, so that every batch gets through.
		if f = ft.fault(ft.sent); f != passes {
			ft.faulted[first] = true
		}
	}
	ft.inFlight++
	ft.maxFlight = max(ft.maxFlight, ft.inFlight)
	n := ft.sent
	ft.mu.Unlock()
	defer func() {
		ft.mu.Lock()
		ft.inFlight--
		ft.latest = max(ft.latest, n)
		close(ft.answered)
		ft.answered = make(chan struct{})
		ft.mu.Unlock()
	}()
	if f == overtaken {
		if err := ft.overtake(req.Context(), n); err != nil {
			return nil, err
		}
	}
	resp, err := ft.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		ft.mu.Lock()
		ft.refused++
		ft.mu.Unlock()
	}
	if f == loseAnswer {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, io.ErrUnexpectedEOF
	}
	return resp, nil
}

// overtake holds call n until a call sent after it is answered, at most
// overtakeHold.
func (ft *faultTransport) overtake(ctx context.Context, n int) error {
	hold := time.NewTimer(overtakeHold)
	defer hold.Stop()
	for {
		ft.mu.Lock()
		latest, answered := ft.latest, ft.answered
		ft.mu.Unlock()
		if latest > n {
			return nil
		}
		select {
		case <-answered:
		case <-hold.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// counts returns the Produce calls sent, the most in flight at once and
// the calls the node refused.
func (ft *faultTransport) counts() (sent, maxFlight, refused int) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return ft.sent, ft.maxFlight, ft.refused
}

// firstValue reads the value of a Produce request's first record,
// leaving the request as it was.
func firstValue(req *http.Request) (string, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return "", err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	var m logdv1.ProduceRequest
	if err := proto.Unmarshal(body, &m); err != nil || len(m.Records) == 0 {
		return "", fmt.Errorf("a Produce request without records: %v", err)
	}
	return string(m.Records[0].Value), nil
}

// stripProducer removes the producer identity from a Connect Produce
// request (binary protobuf, uncompressed: the client's defaults).
func stripProducer(req *http.Request) error {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return err
	}
	var m logdv1.ProduceRequest
	if err := proto.Unmarshal(body, &m); err != nil {
		return fmt.Errorf("strip producer: %w", err)
	}
	m.Producer = nil
	if body, err = proto.Marshal(&m); err != nil {
		return err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	return nil
}

// sentRecord is a record a test sent, with its result channel.
type sentRecord struct {
	value string
	ch    <-chan client.ProduceResult
}

// sendKeyed sends n records keyed by 7 keys, each value unique
// ("v0042"), without waiting for their results.
func sendKeyed(t *testing.T, p *client.Producer, n int) []sentRecord {
	t.Helper()
	out := make([]sentRecord, n)
	for i := range out {
		v := fmt.Sprintf("v%04d", i)
		out[i] = sentRecord{value: v, ch: send(t, p, client.Record{Key: fmt.Appendf(nil, "k%d", i%7), Value: []byte(v)})}
	}
	return out
}

// checkLog reads every partition of topic and checks it against the sent
// records and their results: each record acknowledged is stored exactly
// once, at the offset its result names; no record is stored twice or
// stored that failed for sure; and each partition holds its records in
// the order they were sent (so every key's records are in order). It
// returns the results by value.
func checkLog(t *testing.T, c *client.Client, topic string, parts int32, sent []sentRecord) map[string]client.ProduceResult {
	t.Helper()
	results := map[string]client.ProduceResult{}
	order := map[string]int{}
	for i, s := range sent {
		results[s.value] = result(t, s.ch)
		order[s.value] = i
	}
	seen := map[string]bool{}
	for part := range parts {
		fr, err := c.Fetch(testContext(t), client.FetchRequest{Topic: topic, Partition: part})
		if err != nil {
			t.Fatal(err)
		}
		last := -1
		for _, r := range fr.Records {
			v := string(r.Value)
			if seen[v] {
				t.Errorf("%s-%d@%d: %s stored twice", topic, part, r.Offset, v)
			}
			seen[v] = true
			res, ok := results[v]
			switch {
			case !ok:
				t.Errorf("%s-%d@%d: %s was never sent", topic, part, r.Offset, v)
			case res.Err == nil && (res.Partition != part || res.Offset != r.Offset):
				t.Errorf("%s acknowledged at %d@%d, stored at %d@%d", v, res.Partition, res.Offset, part, r.Offset)
			case res.Err != nil && !isUnknownOutcome(res.Err):
				t.Errorf("%s failed (%v) but was stored at %d@%d", v, res.Err, part, r.Offset)
			}
			if order[v] < last {
				t.Errorf("%s-%d@%d: %s stored after a record sent later", topic, part, r.Offset, v)
			}
			last = max(last, order[v])
		}
	}
	for v, res := range results {
		if res.Err == nil && !seen[v] {
			t.Errorf("%s acknowledged at %d@%d but not stored", v, res.Partition, res.Offset)
		}
	}
	return results
}

func isUnknownOutcome(err error) bool {
	return err != nil && strings.Contains(err.Error(), "outcome unknown")
}

// TestProducerPipelineFaults: a producer pipelining numbered batches over
// three partitions (one record per batch beside batches in flight, so
// every partition keeps several in flight) while the network loses the
// answers of some calls the node wrote (the client sends them again) and
// lets others be overtaken by the call after them (the node refuses the
// overtaking one as out of order, or holds it for the one before): every
// record is acknowledged and stored once, each partition in the order
// sent.
func TestProducerPipelineFaults(t *testing.T) {
	ft := newFaultTransport(func(n int) fault {
		switch {
		case n%7 == 3:
			return loseAnswer
		case n%11 == 5:
			return overtaken
		}
		return passes
	})
	c, _ := newTestClient(t, client.Options{HTTPClient: &http.Client{Transport: ft}})
	mustCreate(t, c, "t", 3)
	p := newProducer(t, c, client.ProducerOptions{Topic: "t", BatchRecords: 3})
	sent := sendKeyed(t, p, 300)
	if err := p.Flush(testContext(t)); err != nil {
		t.Fatal(err)
	}
	for v, r := range checkLog(t, c, "t", 3, sent) {
		if r.Err != nil {
			t.Errorf("%s: %v", v, r.Err)
		}
	}
	calls, maxFlight, refused := ft.counts()
	t.Logf("%d Produce calls, at most %d in flight, %d refused", calls, maxFlight, refused)
	if maxFlight < 4 {
		t.Errorf("at most %d Produce calls in flight: the producer did not pipeline", maxFlight)
	}
}

// TestProducerPipelineReordered: with the node's hold for the batch
// before cut short (every overtaken call waits for an answer, which the
// overtaking call gets only once refused), each refusal as out of order
// makes the producer send the refused batches again, in order.
func TestProducerPipelineReordered(t *testing.T) {
	ft := newFaultTransport(func(n int) fault {
		if n > 1 && n%4 == 0 {
			return overtaken
		}
		return passes
	})
	c, _ := newTestClient(t, client.Options{HTTPClient: &http.Client{Transport: ft}})
	mustCreate(t, c, "t", 1)
	p := newProducer(t, c, client.ProducerOptions{Topic: "t", BatchRecords: 2})
	sent := sendKeyed(t, p, 60)
	for v, r := range checkLog(t, c, "t", 1, sent) {
		if r.Err != nil {
			t.Errorf("%s: %v", v, r.Err)
		}
	}
	if _, _, refused := ft.counts(); refused == 0 {
		t.Errorf("no call was refused as out of order: nothing overtook")
	}
}

// TestProducerPipelineFailedBatch: a batch refused for good fails its
// records; the batches after it, refused as out of order behind the gap,
// go again in a new producer epoch and are stored once, in order.
func TestProducerPipelineFailedBatch(t *testing.T) {
	ft := newFaultTransport(nil)
	c, srv := newTestClient(t, client.Options{HTTPClient: &http.Client{Transport: ft}})
	mustCreate(t, c, "t", 1)
	p := newProducer(t, c, client.ProducerOptions{Topic: "t", BatchRecords: 2})
	// The first batch goes alone (the partition does not know the
	// producer yet); the second call to reach the node is refused.
	srv.Intercept("Produce", func(context.Context) error { return nil },
		func(context.Context) error {
			return logdtest.Error(connect.CodeInvalidArgument, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_INVALID_ARGUMENT}, "refused by the test")
		})
	sent := sendKeyed(t, p, 20)
	failed := 0
	for v, r := range checkLog(t, c, "t", 1, sent) {
		switch {
		case r.Err == nil:
		case strings.Contains(r.Err.Error(), "refused by the test"):
			failed++
		default:
			t.Errorf("%s: %v", v, r.Err)
		}
	}
	if failed != 2 {
		t.Errorf("%d records failed, want the 2 of the refused batch", failed)
	}
}

// TestProducerPipelineFallbacks: a producer sends one batch per partition
// at a time, without a producer id, when the node hands out none, and
// stops numbering when the node answers a numbered batch without checking
// it (a build before the check, which ignores the identity).
func TestProducerPipelineFallbacks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(srv *logdtest.Server, ft *faultTransport)
	}{
		{name: "no producer ids", setup: func(srv *logdtest.Server, _ *faultTransport) {
			srv.FailNext("InitProducerId", connect.NewError(connect.CodeUnimplemented, fmt.Errorf("no ids here")))
		}},
		{name: "identity ignored", setup: func(_ *logdtest.Server, ft *faultTransport) { ft.strip = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft := newFaultTransport(nil)
			c, srv := newTestClient(t, client.Options{HTTPClient: &http.Client{Transport: ft}})
			mustCreate(t, c, "t", 1)
			tc.setup(srv, ft)
			p := newProducer(t, c, client.ProducerOptions{Topic: "t", BatchRecords: 1})
			for v, r := range checkLog(t, c, "t", 1, sendKeyed(t, p, 30)) {
				if r.Err != nil {
					t.Errorf("%s: %v", v, r.Err)
				}
			}
			if _, maxFlight, _ := ft.counts(); maxFlight != 1 {
				t.Errorf("%d Produce calls in flight at once, want 1", maxFlight)
			}
		})
	}
}

// TestProducerPipelineIdempotencyKeys: records with idempotency keys go in
// batches of their own, unnumbered and alone (a call cannot carry both),
// between the numbered ones, and the partition keeps the order sent.
func TestProducerPipelineIdempotencyKeys(t *testing.T) {
	ft := newFaultTransport(nil)
	c, _ := newTestClient(t, client.Options{HTTPClient: &http.Client{Transport: ft}})
	mustCreate(t, c, "t", 1)
	p := newProducer(t, c, client.ProducerOptions{Topic: "t", BatchRecords: 2})
	sent := make([]sentRecord, 30)
	for i := range sent {
		r := client.Record{Value: fmt.Appendf(nil, "v%04d", i)}
		if i%5 == 4 || i%5 == 3 && i > 20 {
			r.IdempotencyKey = fmt.Sprint("key-", i)
		}
		sent[i] = sentRecord{value: string(r.Value), ch: send(t, p, r)}
	}
	for v, r := range checkLog(t, c, "t", 1, sent) {
		if r.Err != nil || r.Duplicate {
			t.Errorf("%s: %+v", v, r)
		}
	}
}
