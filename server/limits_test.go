package server_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/replication/replicationtest"
	"github.com/logd-dev/logd/server"
)

// limitServer serves a single-node Raft group over HTTP (HTTP/1.1 and
// cleartext HTTP/2) with the given limits, through Server.Listener.
func limitServer(t *testing.T, ctx context.Context, limits server.Limits, conns server.ConnLimits) (*httptest.Server, *prometheus.Registry) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	backend := replicationtest.Start(t, replicationtest.Options{}).Backend
	if err := limits.Validate(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv := server.New(server.Options{Backend: backend, Logger: logger, Registry: reg, Limits: limits, Conns: conns})
	hs := httptest.NewUnstartedServer(srv.Handler())
	hs.Listener = srv.Listener(hs.Listener, "api")
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	hs.Config.Protocols = &protocols
	hs.Start()
	t.Cleanup(hs.Close)
	rpc := logdv1connect.NewLogServiceClient(hs.Client(), hs.URL)
	if _, err := rpc.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "t", Partitions: 1})); err != nil {
		t.Fatal(err)
	}
	return hs, reg
}

// metric returns the value of an unlabelled (or first) sample of name.
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) == 0 {
			continue
		}
		m := mf.GetMetric()[0]
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// produceBody is a binary ProduceRequest of one record with a value of n
// bytes.
func produceBody(t *testing.T, n int) []byte {
	t.Helper()
	b, err := proto.Marshal(&logdv1.ProduceRequest{Topic: "t", Records: []*logdv1.Record{{Value: bytes.Repeat([]byte("v"), n)}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// gzipBomb is gzip that inflates to about size bytes of a protobuf-like
// prefix and zeros: members of 1 MiB of zeros, concatenated (gzip readers
// read every member).
func gzipBomb(t *testing.T, size int64) []byte {
	t.Helper()
	var member bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	zw.Write(make([]byte, 1<<20))
	zw.Close()
	var out bytes.Buffer
	for range size >> 20 {
		out.Write(member.Bytes())
	}
	return out.Bytes()
}

// post sends a raw request and returns the connect error it was answered
// with (nil for success).
func post(t *testing.T, ctx context.Context, url string, body io.Reader, length int64, header http.Header) error {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+logdv1connect.LogServiceProduceProcedure, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("Content-Type", "application/proto")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	b, _ := io.ReadAll(resp.Body)
	return fmt.Errorf("%s: %s %v", resp.Status, b, resp.Header)
}

// TestRequestBodyBounds: bodies past the bound are refused with
// RECORD_TOO_LARGE, declared ones without being read; compressed bodies
// are refused as they inflate past it (a gzip bomb costs little), over
// the Connect protocol and in gRPC framing; a fair gzip body is served.
func TestRequestBodyBounds(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const limit = 1 << 20
	hs, reg := limitServer(t, ctx, server.Limits{MaxRequestBytes: limit, BodyTimeout: time.Minute}, server.ConnLimits{})

	t.Run("declared too large, never sent", func(t *testing.T) {
		// Only the headers are sent: an answer proves the body was not
		// waited for.
		c, err := net.Dial("tcp", hs.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/proto\r\nContent-Length: %d\r\n\r\n", logdv1connect.LogServiceProduceProcedure, 100<<20)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(b), "REASON_RECORD_TOO_LARGE") {
			t.Fatalf("got %s %s", resp.Status, b)
		}
	})
	cases := []struct {
		name   string
		body   []byte
		length int64 // -1: chunked
		header http.Header
		want   string // "" for success
	}{
		{name: "chunked past the bound", body: produceBody(t, 2*limit), length: -1, want: "REASON_RECORD_TOO_LARGE"},
		{name: "gzip bomb, Connect", body: gzipBomb(t, 1<<30), length: -1, header: http.Header{"Content-Encoding": {"gzip"}}, want: "REASON_RECORD_TOO_LARGE"},
		{name: "fair gzip body", body: gzipOf(t, produceBody(t, 1000)), length: -1, header: http.Header{"Content-Encoding": {"gzip"}}},
		{name: "bad gzip", body: []byte("not gzip"), length: 8, header: http.Header{"Content-Encoding": {"gzip"}}, want: "gzip request body"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = bytes.NewReader(tc.body)
			if tc.length < 0 {
				body = io.MultiReader(body) // hides the length: chunked
			}
			err := post(t, ctx, hs.URL, body, tc.length, tc.header)
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	// gRPC: a compressed message under the bound as sent (about 260 KiB)
	// that only inflating finds too large, and a plain one past it.
	for name, msg := range map[string][]byte{"gzip bomb, gRPC": gzipBomb(t, 256<<20), "past the bound, gRPC": produceBody(t, 2*limit)} {
		t.Run(name, func(t *testing.T) {
			compressed := strings.HasPrefix(name, "gzip")
			frame := make([]byte, 5, 5+len(msg))
			if compressed {
				frame[0] = 1
			}
			binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
			frame = append(frame, msg...)
			var protocols http.Protocols
			protocols.SetUnencryptedHTTP2(true)
			hc := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
			// No declared length, as gRPC clients send: the body is read.
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+logdv1connect.LogServiceProduceProcedure, io.MultiReader(bytes.NewReader(frame)))
			req.Header.Set("Content-Type", "application/grpc")
			if compressed {
				req.Header.Set("Grpc-Encoding", "gzip")
			}
			req.Header.Set("Te", "trailers")
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			status := resp.Trailer.Get("Grpc-Status") + resp.Header.Get("Grpc-Status")
			msg := resp.Trailer.Get("Grpc-Message") + resp.Header.Get("Grpc-Message")
			// 3: INVALID_ARGUMENT (RECORD_TOO_LARGE), not 8: RESOURCE_EXHAUSTED.
			if status != "3" || !strings.Contains(msg, "larger than this node accepts") {
				t.Fatalf("grpc-status %q message %q", status, msg)
			}
		})
	}
	if got := metric(t, reg, "logd_requests_too_large_total"); got < 5 {
		t.Errorf("logd_requests_too_large_total = %v, want >= 5", got)
	}
	if got := metric(t, reg, "logd_request_inflight_bytes"); got != 0 {
		t.Errorf("in-flight bytes after every request ended: %v", got)
	}
}

func gzipOf(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	zw.Close()
	return out.Bytes()
}

// TestRequestBudget: while a large body holds the budget, another large
// request is refused with OVERLOADED and a retry-after, unread when its
// length is declared; a small one still passes; the charge is released
// when a request ends.
func TestRequestBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const budget = 2 << 20
	hs, reg := limitServer(t, ctx, server.Limits{MaxRequestBytes: 1 << 20, InflightBytes: budget, BodyTimeout: time.Minute}, server.ConnLimits{})

	// Two chunked bodies that stop half-way hold 2 × 800 KiB of the
	// 1.75 MiB large requests may use.
	var held []*io.PipeWriter
	var wg sync.WaitGroup
	for range 2 {
		pr, pw := io.Pipe()
		held = append(held, pw)
		wg.Go(func() { post(t, ctx, hs.URL, pr, -1, nil) })
		if _, err := pw.Write(make([]byte, 800<<10)); err != nil {
			t.Fatal(err)
		}
	}
	waitMetric(t, ctx, reg, "logd_request_inflight_bytes", func(v float64) bool { return v >= 1600<<10 })

	err := post(t, ctx, hs.URL, bytes.NewReader(produceBody(t, 400<<10)), -1, nil)
	if err == nil || !strings.Contains(err.Error(), "overloaded") || !strings.Contains(err.Error(), "retry after") {
		t.Fatalf("declared large request while the budget is held: %v", err)
	}
	if err := post(t, ctx, hs.URL, bytes.NewReader(produceBody(t, 100)), -1, nil); err != nil {
		t.Fatalf("small request while the budget is held: %v", err)
	}
	if got := metric(t, reg, "logd_request_budget_refusals_total"); got != 1 {
		t.Errorf("refusals = %v, want 1", got)
	}
	for _, pw := range held {
		pw.CloseWithError(io.ErrUnexpectedEOF)
	}
	wg.Wait()
	waitMetric(t, ctx, reg, "logd_request_inflight_bytes", func(v float64) bool { return v == 0 })
}

func waitMetric(t *testing.T, ctx context.Context, reg *prometheus.Registry, name string, ok func(float64) bool) {
	t.Helper()
	for !ok(metric(t, reg, name)) {
		select {
		case <-ctx.Done():
			t.Fatalf("%s = %v", name, metric(t, reg, name))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestBodyDeadline: a body trickled slower than the minimum rate is cut
// after the body timeout; a long poll whose body arrived at once waits
// its full max_wait_ms, over HTTP/1.1 and HTTP/2, though that is longer
// than the body timeout.
func TestBodyDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	hs, reg := limitServer(t, ctx, server.Limits{BodyTimeout: 300 * time.Millisecond, BodyMinRate: 1000}, server.ConnLimits{})

	pr, pw := io.Pipe()
	go func() {
		for {
			if _, err := pw.Write([]byte{0}); err != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	err := post(t, ctx, hs.URL, pr, -1, nil)
	pw.Close()
	if err == nil || !strings.Contains(err.Error(), "too slow") {
		t.Fatalf("trickled body: %v", err)
	}
	if got := metric(t, reg, "logd_request_body_timeouts_total"); got != 1 {
		t.Errorf("body timeouts = %v, want 1", got)
	}

	var h2 http.Protocols
	h2.SetUnencryptedHTTP2(true)
	for name, rpc := range map[string]logdv1connect.LogServiceClient{
		"Connect, HTTP/1.1": logdv1connect.NewLogServiceClient(hs.Client(), hs.URL),
		"gRPC, HTTP/2":      logdv1connect.NewLogServiceClient(&http.Client{Transport: &http.Transport{Protocols: &h2}}, hs.URL, connect.WithGRPC()),
	} {
		start := time.Now()
		resp, err := rpc.Fetch(ctx, connect.NewRequest(&logdv1.FetchRequest{Topic: "t", MaxWaitMs: 1000}))
		if err != nil {
			t.Fatalf("%s long poll: %v", name, err)
		}
		if len(resp.Msg.Records) != 0 || time.Since(start) < time.Second {
			t.Fatalf("%s long poll answered after %v with %d records, want an empty answer after its wait", name, time.Since(start), len(resp.Msg.Records))
		}
	}
}

// TestListenerLimits: an address at its cap has new connections closed;
// at the listener's cap, a new connection waits until one closes, and is
// then served.
func TestListenerLimits(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	hs, reg := limitServer(t, ctx, server.Limits{}, server.ConnLimits{Max: 3, MaxPerAddr: 2})
	hs.Client().CloseIdleConnections()
	addr := hs.Listener.Addr().String()
	dial := func(from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// healthy sends GET /healthz and reports whether it was answered.
	healthy := func(c net.Conn) bool {
		t.Helper()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	waitMetric(t, ctx, reg, "logd_connections_open", func(v float64) bool { return v == 0 })
	a1, a2 := dial("127.0.0.1"), dial("127.0.0.1")
	if !healthy(a1) || !healthy(a2) {
		t.Fatal("connections under the caps not served")
	}
	if healthy(dial("127.0.0.1")) {
		t.Fatal("a third connection from one address was served; the address cap is 2")
	}
	b1 := dial("127.0.0.2")
	if !healthy(b1) {
		t.Fatal("a connection from another address was not served")
	}
	// The listener is full: a fourth connection waits.
	c1 := dial("127.0.0.3")
	served := make(chan bool, 1)
	go func() { served <- healthy(c1) }()
	waitMetric(t, ctx, reg, "logd_connection_limit_waits_total", func(v float64) bool { return v >= 1 })
	select {
	case <-served:
		t.Fatal("a connection past the listener's cap was served while it was full")
	case <-time.After(200 * time.Millisecond):
	}
	a1.Close()
	if !<-served {
		t.Fatal("the waiting connection was not served once a slot was free")
	}
	if got := metric(t, reg, "logd_connections_refused_total"); got != 1 {
		t.Errorf("refused = %v, want 1", got)
	}
}

// TestListenersShareOnePool: the listeners Server.Listener wraps (the
// API's and the Kafka listener's) count their connections against one
// Max together: with two open on one, a connection to the other waits
// until one of them closes.
func TestListenersShareOnePool(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	n := replicationtest.Start(t, replicationtest.Options{})
	srv := server.New(server.Options{Backend: n.Backend, Logger: logger, Registry: prometheus.NewRegistry(),
		Conns: server.ConnLimits{Max: 2}})
	accepted := map[string]chan net.Conn{}
	addrs := map[string]string{}
	for _, name := range []string{"api", "kafka"} {
		raw, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln := srv.Listener(raw, name)
		t.Cleanup(func() { ln.Close() })
		ch := make(chan net.Conn, 4)
		accepted[name], addrs[name] = ch, raw.Addr().String()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				t.Cleanup(func() { c.Close() })
				ch <- c
			}
		}()
	}
	dial := func(name string) {
		t.Helper()
		c, err := net.Dial("tcp", addrs[name])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	take := func(name string) net.Conn {
		t.Helper()
		select {
		case c := <-accepted[name]:
			return c
		case <-ctx.Done():
			t.Fatalf("no connection accepted on %s", name)
			return nil
		}
	}
	dial("api")
	dial("api")
	first, _ := take("api"), take("api")
	dial("kafka")
	select {
	case <-accepted["kafka"]:
		t.Fatal("the Kafka listener accepted a third connection; the two listeners' cap is 2")
	case <-time.After(200 * time.Millisecond):
	}
	first.Close()
	take("kafka")
}
