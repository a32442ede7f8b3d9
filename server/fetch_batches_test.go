package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/replication/replicationtest"
	"github.com/logd-dev/logd/server"
)

// olderBuild plays a server of a build before FetchRequest.batches: such a
// server skips the field it does not know and answers records.
type olderBuild struct{ *server.Server }

func (o olderBuild) Fetch(ctx context.Context, req *connect.Request[logdv1.FetchRequest]) (*connect.Response[logdv1.FetchResponse], error) {
	req.Msg.Batches = false
	return o.Server.Fetch(ctx, req)
}

func (o olderBuild) GroupFetch(ctx context.Context, req *connect.Request[logdv1.GroupFetchRequest]) (*connect.Response[logdv1.GroupFetchResponse], error) {
	if f := req.Msg.GetFetch(); f != nil {
		f.Batches = false
	}
	return o.Server.GroupFetch(ctx, req)
}

// fetchEnv is a node served over HTTP, with a client of each way to
// fetch: batches (the default), records (Options.FetchRecords), and
// batches asked of an older build, which answers records.
type fetchEnv struct {
	backend *replicationtest.Node
	api     logdv1connect.LogServiceClient
	oldAPI  logdv1connect.LogServiceClient // of the older build
	url     string
	batches *client.Client
	records *client.Client
	old     *client.Client
	mu      sync.Mutex
	// fetching, if set, is closed by the next Fetch that reaches the
	// server. Guarded by mu.
	fetching chan struct{}
	// asked counts the Fetch calls that reached the server (the older
	// build's aside) by whether they asked for batches. Guarded by mu.
	asked map[bool]int
}

func newFetchEnv(t *testing.T) *fetchEnv {
	t.Helper()
	// The node registers its API address, and with it its feature level,
	// which zstd batches need.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := replicationtest.Start(t, replicationtest.Options{APIAdvertise: ln.Addr().String()})
	srv := server.New(server.Options{Backend: n.Backend, Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
	e := &fetchEnv{backend: n, asked: make(map[bool]int)}
	h := srv.Handler()
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == logdv1connect.LogServiceFetchProcedure && r.Header.Get("Content-Type") == "application/proto" {
			// The client's unary calls are uncompressed protobuf.
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m logdv1.FetchRequest
			if err := proto.Unmarshal(body, &m); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			e.mu.Lock()
			e.asked[m.Batches]++
			if e.fetching != nil {
				close(e.fetching)
				e.fetching = nil
			}
			e.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	hs.Listener.Close()
	hs.Listener = ln
	hs.Start()
	t.Cleanup(hs.Close)
	path, oh := logdv1connect.NewLogServiceHandler(olderBuild{srv})
	mux := http.NewServeMux()
	mux.Handle(path, oh)
	old := httptest.NewServer(mux)
	t.Cleanup(old.Close)

	e.url = hs.URL
	e.api = logdv1connect.NewLogServiceClient(http.DefaultClient, hs.URL)
	e.oldAPI = logdv1connect.NewLogServiceClient(http.DefaultClient, old.URL)
	newClient := func(url string, opts client.Options) *client.Client {
		opts.Retry = client.RetryPolicy{MaxAttempts: 1}
		c, err := client.New(url, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	e.batches = newClient(hs.URL, client.Options{})
	e.records = newClient(hs.URL, client.Options{FetchRecords: true})
	e.old = newClient(old.URL, client.Options{})
	return e
}

// appendBatch appends records to partition 0 of topic as one batch
// compressed with codec, as a Kafka producer would send it.
func (e *fetchEnv) appendBatch(t *testing.T, ctx context.Context, topic string, codec batch.Compression, recs []batch.Record) {
	t.Helper()
	b, err := batch.Build(recs)
	if err != nil {
		t.Fatal(err)
	}
	if codec != batch.CompressionNone {
		if b, err = batch.Compress(b, codec); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.backend.Backend.Append(ctx, backend.Append{Topic: topic, Batches: []backend.PartitionBatch{{Partition: 0, Batch: b}}}); err != nil {
		t.Fatalf("append a %s batch: %v", codec, err)
	}
}

// fill writes four batches to partition 0 of topic: offsets 0-4
// (produced through the API: null and empty keys and values, headers
// with null and empty values), 5-8 (gzip), 9-11 (zstd) and 12-21
// (produced). It returns the records as written, timestamps aside.
func (e *fetchEnv) fill(t *testing.T, ctx context.Context, topic string) []client.FetchedRecord {
	t.Helper()
	if _, err := e.batches.CreateTopic(ctx, topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	var want []client.FetchedRecord
	p0 := int32(0)
	produce := func(recs []client.Record) {
		t.Helper()
		for i := range recs {
			recs[i].Partition = &p0
		}
		if _, err := e.batches.Produce(ctx, topic, recs); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			want = append(want, client.FetchedRecord{Topic: topic, Offset: int64(len(want)), Key: r.Key, Value: r.Value, Headers: r.Headers})
		}
	}
	appendBatch := func(codec batch.Compression, recs []batch.Record) {
		t.Helper()
		e.appendBatch(t, ctx, topic, codec, recs)
		for _, r := range recs {
			fr := client.FetchedRecord{Topic: topic, Offset: int64(len(want)), Timestamp: time.UnixMilli(r.Timestamp), Key: r.Key, Value: r.Value}
			for _, h := range r.Headers {
				fr.Headers = append(fr.Headers, client.Header(h))
			}
			want = append(want, fr)
		}
	}
	produce([]client.Record{
		{Value: []byte("v0"), Headers: []client.Header{{Key: "h", Value: []byte("x")}, {Key: "null", Value: nil}, {Key: "empty", Value: []byte{}}}},
		{Key: []byte{}, Value: nil},
		{Key: []byte("k2"), Value: []byte{}},
		{Key: []byte("k3"), Value: []byte("v3")},
		{Key: []byte("k4"), Value: []byte("v4"), Headers: []client.Header{{Key: "a", Value: []byte("b")}}},
	})
	ts := time.Now().UnixMilli()
	appendBatch(batch.CompressionGzip, []batch.Record{
		{Timestamp: ts, Key: []byte("g5"), Value: []byte(strings.Repeat("gzip ", 20))},
		{Timestamp: ts + 1, Key: nil, Value: []byte("g6"), Headers: []batch.Header{{Key: "gh", Value: []byte("1")}, {Key: "gnull"}}},
		{Timestamp: ts + 2, Key: []byte("g7"), Value: nil},
		{Timestamp: ts + 3, Key: []byte{}, Value: []byte{}},
	})
	appendBatch(batch.CompressionZstd, []batch.Record{
		{Timestamp: ts + 4, Key: []byte("z9"), Value: []byte(strings.Repeat("zstd ", 20)), Headers: []batch.Header{{Key: "zh", Value: []byte{}}}},
		{Timestamp: ts + 5, Key: []byte("z10"), Value: nil},
		{Timestamp: ts + 6, Key: nil, Value: []byte("z11")},
	})
	var tail []client.Record
	for i := range 10 {
		tail = append(tail, client.Record{Key: fmt.Appendf(nil, "k%d", 12+i), Value: fmt.Appendf(nil, "v%d", 12+i)})
	}
	produce(tail)
	return want
}

// sameRecords reports how got differs from want, timestamps aside where
// want has none.
func sameRecords(got, want []client.FetchedRecord) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if w.Timestamp.IsZero() {
			g.Timestamp = time.Time{}
		}
		if !reflect.DeepEqual(g, w) {
			return fmt.Errorf("record %d: %+v, want %+v", i, g, w)
		}
	}
	return nil
}

// TestFetchBatchesMatchRecords: a fetch of the stored batches, decoded by
// the client, returns exactly the records a fetch of records returns (and
// an older build's answer of records to a client that asked for batches),
// from every offset (the middle of a batch too) with max_records and a
// max_bytes smaller than one batch, over uncompressed, gzip and zstd
// batches holding null and empty keys, values and header values.
func TestFetchBatchesMatchRecords(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := newFetchEnv(t)
	want := e.fill(t, ctx, "t")
	const end = 22

	all, err := e.batches.Fetch(ctx, client.FetchRequest{Topic: "t", Offset: 0})
	if err != nil {
		t.Fatal(err)
	}
	if err := sameRecords(all.Records, want); err != nil {
		t.Fatalf("batches from 0: %v", err)
	}
	if all.Next != end || all.End != end || all.LogStart != 0 {
		t.Fatalf("batches from 0: next %d, bounds [%d, %d); want next and end %d", all.Next, all.LogStart, all.End, end)
	}

	resp, err := e.oldAPI.Fetch(ctx, connect.NewRequest(&logdv1.FetchRequest{Topic: "t", Offset: 0, Batches: true}))
	if err != nil || len(resp.Msg.Batches) != 0 || len(resp.Msg.Records) != end {
		t.Fatalf("the older build answers %+v, %v; want records only", resp, err)
	}
	calls := 0
	for off := int64(0); off <= end; off++ {
		for _, maxRecords := range []int32{0, 1, 2, 3, 5} {
			for _, maxBytes := range []int32{0, 1} {
				fr := client.FetchRequest{Topic: "t", Offset: off, MaxRecords: maxRecords, MaxBytes: maxBytes}
				name := fmt.Sprintf("offset %d, max_records %d, max_bytes %d", off, maxRecords, maxBytes)
				calls++
				byRecords, err := e.records.Fetch(ctx, fr)
				if err != nil {
					t.Fatalf("%s: records: %v", name, err)
				}
				for mode, c := range map[string]*client.Client{"batches": e.batches, "an older build": e.old} {
					got, err := c.Fetch(ctx, fr)
					if err != nil {
						t.Fatalf("%s: %s: %v", name, mode, err)
					}
					if !reflect.DeepEqual(got, byRecords) {
						t.Errorf("%s: %s answer\n%+v\nrecords answer\n%+v", name, mode, got, byRecords)
					}
				}
				if err := sameRecords(byRecords.Records, want[off:off+int64(len(byRecords.Records))]); err != nil {
					t.Errorf("%s: %v", name, err)
				}
				if off < end && len(byRecords.Records) == 0 {
					t.Errorf("%s: no records", name)
				}
			}
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.asked[true] != calls+1 || e.asked[false] != calls {
		t.Errorf("the server was asked for batches %d times and records %d times; want %d and %d", e.asked[true], e.asked[false], calls+1, calls)
	}
}

// TestFetchBatchesAnswer: what the server answers a fetch of batches:
// whole batches as stored (compressed ones compressed) with their leader
// epoch -1, from the one holding the offset, as many as max_records needs
// counted from the offset, one however small max_bytes is; and without
// batches the answer of records, in JSON too, as before.
func TestFetchBatchesAnswer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := newFetchEnv(t)
	e.fill(t, ctx, "t")
	fetch := func(m *logdv1.FetchRequest) *logdv1.FetchResponse {
		t.Helper()
		m.Topic = "t"
		resp, err := e.api.Fetch(ctx, connect.NewRequest(m))
		if err != nil {
			t.Fatalf("fetch %+v: %v", m, err)
		}
		return resp.Msg
	}
	type stored struct {
		base  int64
		codec batch.Compression
	}
	for _, tc := range []struct {
		name string
		req  *logdv1.FetchRequest
		want []stored
		next int64
	}{
		{name: "all", req: &logdv1.FetchRequest{Offset: 0}, next: 22,
			want: []stored{{0, batch.CompressionNone}, {5, batch.CompressionGzip}, {9, batch.CompressionZstd}, {12, batch.CompressionNone}}},
		{name: "from the middle of a batch", req: &logdv1.FetchRequest{Offset: 7}, next: 22,
			want: []stored{{5, batch.CompressionGzip}, {9, batch.CompressionZstd}, {12, batch.CompressionNone}}},
		{name: "max_records within the first batch from its middle", req: &logdv1.FetchRequest{Offset: 2, MaxRecords: 3}, next: 5,
			want: []stored{{0, batch.CompressionNone}}},
		{name: "max_records one past the first batch", req: &logdv1.FetchRequest{Offset: 2, MaxRecords: 4}, next: 9,
			want: []stored{{0, batch.CompressionNone}, {5, batch.CompressionGzip}}},
		{name: "max_bytes smaller than a batch", req: &logdv1.FetchRequest{Offset: 6, MaxBytes: 1}, next: 9,
			want: []stored{{5, batch.CompressionGzip}}},
		{name: "at the end", req: &logdv1.FetchRequest{Offset: 22}, next: 22},
	} {
		tc.req.Batches = true
		m := fetch(tc.req)
		if len(m.Records) != 0 || m.NextOffset != tc.next || m.EndOffset != 22 {
			t.Errorf("%s: %d records, next %d, end %d; want none, %d, 22", tc.name, len(m.Records), m.NextOffset, m.EndOffset, tc.next)
		}
		bs, err := batch.DecodeAll(m.Batches)
		if err != nil {
			t.Fatalf("%s: the answer's batches: %v", tc.name, err)
		}
		var got []stored
		for _, b := range bs {
			got = append(got, stored{b.BaseOffset, b.Compression()})
			if b.PartitionLeaderEpoch != batch.UnknownLeaderEpoch {
				t.Errorf("%s: batch at %d has leader epoch %d; want %d", tc.name, b.BaseOffset, b.PartitionLeaderEpoch, batch.UnknownLeaderEpoch)
			}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: batches %v; want %v", tc.name, got, tc.want)
		}
	}

	// Without batches, records as before.
	if m := fetch(&logdv1.FetchRequest{Offset: 0}); len(m.Batches) != 0 || len(m.Records) != 22 || m.NextOffset != 22 {
		t.Errorf("records: %d records, %d batch bytes, next %d; want 22, 0, 22", len(m.Records), len(m.Batches), m.NextOffset)
	}
	resp, err := http.Post(e.url+logdv1connect.LogServiceFetchProcedure, "application/json", strings.NewReader(`{"topic":"t","offset":21}`))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"records":[{"offset":"21"`)) || bytes.Contains(body, []byte("batches")) {
		t.Errorf("JSON fetch: %d %s, %v; want records and no batches", resp.StatusCode, body, err)
	}
}

// TestFetchBatchesErrors: bad input fails a fetch of batches as it fails
// a fetch of records: the same code, reason and message, and through the
// client the same typed errors.
func TestFetchBatchesErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := newFetchEnv(t)
	e.fill(t, ctx, "t")
	for _, tc := range []struct {
		name   string
		req    *logdv1.FetchRequest
		reason logdv1.Reason
		is     error
	}{
		{name: "negative offset", req: &logdv1.FetchRequest{Topic: "t", Offset: -1}, reason: logdv1.Reason_REASON_INVALID_ARGUMENT, is: client.ErrInvalidArgument},
		{name: "past the end", req: &logdv1.FetchRequest{Topic: "t", Offset: 23}, reason: logdv1.Reason_REASON_OFFSET_OUT_OF_RANGE, is: client.ErrOffsetOutOfRange},
		{name: "unknown topic", req: &logdv1.FetchRequest{Topic: "nope"}, reason: logdv1.Reason_REASON_UNKNOWN_TOPIC, is: client.ErrUnknownTopic},
		{name: "unknown partition", req: &logdv1.FetchRequest{Topic: "t", Partition: 3}, reason: logdv1.Reason_REASON_UNKNOWN_PARTITION, is: client.ErrUnknownPartition},
		{name: "negative max_records", req: &logdv1.FetchRequest{Topic: "t", MaxRecords: -1}, reason: logdv1.Reason_REASON_INVALID_ARGUMENT, is: client.ErrInvalidArgument},
	} {
		var errs [2]*connect.Error
		for i, batches := range []bool{false, true} {
			tc.req.Batches = batches
			_, err := e.api.Fetch(ctx, connect.NewRequest(tc.req))
			if !errors.As(err, &errs[i]) {
				t.Fatalf("%s (batches %v): %v; want a Connect error", tc.name, batches, err)
			}
			if got := reasonOf(err); got != tc.reason {
				t.Errorf("%s (batches %v): reason %v; want %v", tc.name, batches, got, tc.reason)
			}
		}
		if errs[0].Code() != errs[1].Code() || errs[0].Message() != errs[1].Message() {
			t.Errorf("%s: batches answer %v; records answer %v", tc.name, errs[1], errs[0])
		}
		fr := client.FetchRequest{Topic: tc.req.Topic, Partition: tc.req.Partition, Offset: tc.req.Offset, MaxRecords: tc.req.MaxRecords}
		for mode, c := range map[string]*client.Client{"batches": e.batches, "records": e.records} {
			_, err := c.Fetch(ctx, fr)
			if !errors.Is(err, tc.is) {
				t.Errorf("%s: client fetching %s: %v; want %v", tc.name, mode, err, tc.is)
			}
			var oor *client.OutOfRangeError
			if tc.is == client.ErrOffsetOutOfRange && (!errors.As(err, &oor) || oor.LogStart != 0 || oor.End != 22 || oor.Offset != 23) {
				t.Errorf("%s: client fetching %s: %#v; want bounds [0, 22) and offset 23", tc.name, mode, oor)
			}
		}
	}
}

// TestFetchBatchesLongPoll: a fetch of batches at the end of the log
// waits for the next append and answers it.
func TestFetchBatchesLongPoll(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := newFetchEnv(t)
	e.fill(t, ctx, "t")
	fetching := make(chan struct{})
	e.mu.Lock()
	e.fetching = fetching
	e.mu.Unlock()
	type result struct {
		resp client.FetchResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := e.batches.Fetch(ctx, client.FetchRequest{Topic: "t", Offset: 22, MaxWait: 30 * time.Second})
		done <- result{resp, err}
	}()
	<-fetching
	e.appendBatch(t, ctx, "t", batch.CompressionGzip, []batch.Record{{Timestamp: 1e12, Key: []byte("late"), Value: []byte("gzip")}})
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	late := client.FetchedRecord{Topic: "t", Offset: 22, Timestamp: time.UnixMilli(1e12), Key: []byte("late"), Value: []byte("gzip")}
	if err := sameRecords(res.resp.Records, []client.FetchedRecord{late}); err != nil || res.resp.Next != 23 {
		t.Fatalf("long poll: %v, next %d; want the late record, next 23", err, res.resp.Next)
	}
}

// TestGroupFetchBatches: a group member's fetch of batches answers
// batches, the one that resets an offset retention passed (and continues
// at the reset target) too.
func TestGroupFetchBatches(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := newFetchEnv(t)
	// One segment per produce call, so retention trims whole calls: the
	// first two, of a time long past, go; the active third stays.
	if _, err := e.batches.CreateTopic(ctx, "g", 1, map[string]string{"segment.bytes": "14"}); err != nil {
		t.Fatal(err)
	}
	p0 := int32(0)
	for i := range 3 {
		rec := client.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i), Partition: &p0, Timestamp: time.UnixMilli(1e12)}
		if _, err := e.batches.Produce(ctx, "g", []client.Record{rec}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.backend.Clean(ctx); err != nil {
		t.Fatal(err)
	}
	joined, err := e.api.JoinGroup(ctx, connect.NewRequest(&logdv1.JoinGroupRequest{Group: "gr", MemberId: "m1", Topics: []string{"g"}, ResetPolicy: "earliest"}))
	if err != nil {
		t.Fatal(err)
	}
	gen := joined.Msg.GetAssignment().GetGeneration()
	for _, tc := range []struct {
		name      string
		offset    int64
		autoReset bool
	}{
		{name: "below the log start", offset: 0, autoReset: true},
		{name: "at the log start", offset: 2},
	} {
		resp, err := e.api.GroupFetch(ctx, connect.NewRequest(&logdv1.GroupFetchRequest{Group: "gr", MemberId: "m1", Generation: gen,
			Fetch: &logdv1.FetchRequest{Topic: "g", Offset: tc.offset, Batches: true}}))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		m := resp.Msg
		f := m.GetFetch()
		recs, err := batch.Records(f.GetBatches(), 2, 0)
		if err != nil || len(recs) != 1 || string(recs[0].Value) != "v2" || len(f.GetRecords()) != 0 || f.GetNextOffset() != 3 {
			t.Errorf("%s: batches decode to %+v, %v; %d records, next %d; want v2 at 2 in batches, next 3", tc.name, recs, err, len(f.GetRecords()), f.GetNextOffset())
		}
		if m.AutoReset != tc.autoReset || (tc.autoReset && m.ResetTo != 2) {
			t.Errorf("%s: auto reset %v to %d; want %v to 2", tc.name, m.AutoReset, m.ResetTo, tc.autoReset)
		}
	}
}
