package server_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/server"
	"github.com/prometheus/client_golang/prometheus"
)

// TestResponseBudget: fetches asking for as much as they may, many at once
// over one HTTP/2 connection, are held to the answer budget: the bytes
// charged at once never pass the client's share of it (half the budget;
// every call here comes from one address), the fetches past it wait or
// are refused with OVERLOADED and a retry-after, and every charge is
// given back. With the budget switched off (InflightResponseBytes -1 in
// budgetServer) the peak passes the share and nothing waits, and the test
// fails.
func TestResponseBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const (
		records = 16
		fetches = 24
	)
	hs, reg, _ := budgetServer(t, ctx, 200*time.Millisecond, records)

	// One HTTP/2 connection carries every fetch.
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	h2 := logdv1connect.NewLogServiceClient(&http.Client{Transport: tr}, hs.URL)
	var (
		wg              sync.WaitGroup
		mu              sync.Mutex
		served, refused int
		unexpected      []error
	)
	for i := range fetches {
		wg.Go(func() {
			resp, err := h2.Fetch(ctx, connect.NewRequest(&logdv1.FetchRequest{Topic: "t", Offset: int64(i % records), MaxBytes: math.MaxInt32}))
			mu.Lock()
			defer mu.Unlock()
			var ce *connect.Error
			switch {
			case err == nil && len(resp.Msg.Records) > 0:
				served++
			case errors.As(err, &ce) && ce.Code() == connect.CodeResourceExhausted && retryAfterOf(ce) > 0:
				refused++
			default:
				unexpected = append(unexpected, err)
			}
		})
	}
	wg.Wait()
	if len(unexpected) > 0 {
		t.Fatalf("%d fetches neither served nor refused with a retry-after; first: %v", len(unexpected), unexpected[0])
	}
	peak := metric(t, reg, "logd_response_inflight_peak_bytes")
	waits := metric(t, reg, "logd_response_budget_waits_total")
	t.Logf("%d fetches: %d served, %d refused; peak %.0f bytes charged, %v waits", fetches, served, refused, peak, waits)
	if peak <= 0 || peak > testShare {
		t.Errorf("peak charge %.0f bytes; want in (0, %d], the client's share of the budget", peak, testShare)
	}
	if waits == 0 {
		t.Errorf("no fetch waited: %d answers of up to %d bytes each fit in a share of %d at once", fetches, records*recordLen, testShare)
	}
	if served == 0 {
		t.Errorf("no fetch served")
	}
	if got := metric(t, reg, "logd_response_budget_refusals_total"); int(got) != refused {
		t.Errorf("refusals metric %v, %d refused", got, refused)
	}
	waitMetric(t, ctx, reg, "logd_response_inflight_bytes", func(v float64) bool { return v == 0 })
}

// The answer budget of the tests, and one client's share of it.
const (
	testBudget = 4 << 20
	testShare  = testBudget / 2
	recordLen  = 256 << 10
)

// budgetServer serves a node with an answer budget of testBudget whose
// answers wait for room up to wait, and topic t holding records of
// recordLen bytes.
func budgetServer(t *testing.T, ctx context.Context, wait time.Duration, records int) (*httptest.Server, *prometheus.Registry, logdv1connect.LogServiceClient) {
	t.Helper()
	hs, reg := limitServer(t, ctx, server.Limits{InflightResponseBytes: testBudget, ResponseWait: wait}, server.ConnLimits{})
	rpc := logdv1connect.NewLogServiceClient(hs.Client(), hs.URL)
	for range records {
		rec := &logdv1.Record{Value: make([]byte, recordLen)}
		if _, err := rpc.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "t", Records: []*logdv1.Record{rec}})); err != nil {
			t.Fatal(err)
		}
	}
	return hs, reg, rpc
}

// retryAfterOf returns the retry-after an error carries.
func retryAfterOf(ce *connect.Error) time.Duration {
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if info, ok := v.(*logdv1.ErrorInfo); ok && info.Reason == logdv1.Reason_REASON_OVERLOADED {
				return time.Duration(info.RetryAfterMs) * time.Millisecond
			}
		}
	}
	return 0
}

// TestClaimAnswerBudget: claims are charged once records are claimable,
// before they are leased: a claim refused with OVERLOADED leased nothing,
// so every record is claimed exactly once in the end, and the bytes
// charged at once never pass the client's share.
func TestClaimAnswerBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const (
		records = 12
		claims  = 12
	)
	_, reg, rpc := budgetServer(t, ctx, 10*time.Millisecond, records)
	if _, err := rpc.CreateQueueGroup(ctx, connect.NewRequest(&logdv1.CreateQueueGroupRequest{Topic: "t", Group: "w"})); err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		claimed = map[int64]int{}
		refused int
		wg      sync.WaitGroup
	)
	claim := func() error {
		resp, err := rpc.Claim(ctx, connect.NewRequest(&logdv1.ClaimRequest{Topic: "t", Group: "w", MaxRecords: 3, MaxBytes: math.MaxInt32, LeaseMs: 60_000}))
		mu.Lock()
		defer mu.Unlock()
		var ce *connect.Error
		switch {
		case errors.As(err, &ce) && ce.Code() == connect.CodeResourceExhausted && retryAfterOf(ce) > 0:
			refused++
			return nil
		case err != nil:
			return err
		}
		for _, r := range resp.Msg.Records {
			claimed[r.Offset]++
		}
		return nil
	}
	for range claims {
		wg.Go(func() {
			if err := claim(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for len(claimed) < records && ctx.Err() == nil {
		if err := claim(); err != nil {
			t.Fatal(err)
		}
	}
	for off, n := range claimed {
		if n != 1 {
			t.Errorf("offset %d claimed %d times", off, n)
		}
	}
	if len(claimed) != records {
		t.Errorf("%d of %d records claimed", len(claimed), records)
	}
	peak := metric(t, reg, "logd_response_inflight_peak_bytes")
	t.Logf("%d claims at once: %d refused; peak %.0f bytes charged", claims, refused, peak)
	if peak <= 0 || peak > testShare {
		t.Errorf("peak charge %.0f bytes; want in (0, %d]", peak, testShare)
	}
	waitMetric(t, ctx, reg, "logd_response_inflight_bytes", func(v float64) bool { return v == 0 })
}

// TestDeadLetterListBudget: ListDeadLetters calls, many at once over one
// HTTP/2 connection, are charged for the most they may answer before they
// read: the bytes charged at once never pass the client's share, the
// lists past it wait or are refused with OVERLOADED and a retry-after,
// the largest answer served was charged at least its record bytes, and
// every charge is given back. Without the charge (dlq_list.go) nothing is
// charged and nothing waits, and the test fails.
func TestDeadLetterListBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const (
		records = 8
		lists   = 12
		// Each list asks for what fills the client's share (answerCost:
		// twice its bytes), so lists are answered one at a time.
		listBytes = testShare / 2
	)
	hs, reg, rpc := budgetServer(t, ctx, 200*time.Millisecond, records)
	dlq := deadLetters(t, ctx, rpc, "t", "w", records)

	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	h2 := logdv1connect.NewLogServiceClient(&http.Client{Transport: tr}, hs.URL)
	var (
		wg              sync.WaitGroup
		mu              sync.Mutex
		served, refused int
		largest         int64 // record bytes of the largest answer served
		unexpected      []error
	)
	for range lists {
		wg.Go(func() {
			resp, err := h2.ListDeadLetters(ctx, connect.NewRequest(&logdv1.ListDeadLettersRequest{Topic: dlq, MaxBytes: listBytes}))
			mu.Lock()
			defer mu.Unlock()
			var ce *connect.Error
			switch {
			case err == nil && len(resp.Msg.DeadLetters) > 0:
				served++
				var n int64
				for _, d := range resp.Msg.DeadLetters {
					n += int64(len(d.Key) + len(d.Value))
				}
				largest = max(largest, n)
			case errors.As(err, &ce) && ce.Code() == connect.CodeResourceExhausted && retryAfterOf(ce) > 0:
				refused++
			default:
				unexpected = append(unexpected, err)
			}
		})
	}
	wg.Wait()
	if len(unexpected) > 0 {
		t.Fatalf("%d lists neither served nor refused with a retry-after; first: %v", len(unexpected), unexpected[0])
	}
	peak := metric(t, reg, "logd_response_inflight_peak_bytes")
	waits := metric(t, reg, "logd_response_budget_waits_total")
	t.Logf("%d lists: %d served, %d refused; largest answer %d record bytes; peak %.0f bytes charged, %v waits", lists, served, refused, largest, peak, waits)
	if served == 0 {
		t.Fatalf("no list served")
	}
	if peak > testShare {
		t.Errorf("peak charge %.0f bytes; want at most %d, the client's share of the budget", peak, testShare)
	}
	if peak < float64(2*largest) {
		t.Errorf("peak charge %.0f bytes; an answer of %d record bytes was served, which is charged twice that", peak, largest)
	}
	if waits == 0 {
		t.Errorf("no list waited: %d lists charged %d bytes each fit in a share of %d at once", lists, 2*listBytes, testShare)
	}
	if got := metric(t, reg, "logd_response_budget_refusals_total"); int(got) != refused {
		t.Errorf("refusals metric %v, %d refused", got, refused)
	}
	waitMetric(t, ctx, reg, "logd_response_inflight_bytes", func(v float64) bool { return v == 0 })

	// A list asking for more than the share builds no more than it is
	// charged for: its bytes bound is cut to the largest answer the
	// budget charges, as a fetch's is.
	resp, err := h2.ListDeadLetters(ctx, connect.NewRequest(&logdv1.ListDeadLettersRequest{Topic: dlq, MaxBytes: 4 * testShare}))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, d := range resp.Msg.DeadLetters {
		n += int64(len(d.Key) + len(d.Value))
	}
	if n > testShare/2 {
		t.Errorf("a list asking for %d bytes answered %d record bytes in %d dead letters; the budget charges at most %d", 4*testShare, n, len(resp.Msg.DeadLetters), testShare/2)
	}
}

// deadLetters dead-letters the first n records of topic through a queue
// group allowing one delivery (claimed and rejected), and returns the
// dead-letter topic once it lists them all. Its calls are charged a few
// bytes each, so the answer budget's peak stays below a record's.
func deadLetters(t *testing.T, ctx context.Context, rpc logdv1connect.LogServiceClient, topic, group string, n int) string {
	t.Helper()
	one := int32(1)
	if _, err := rpc.CreateQueueGroup(ctx, connect.NewRequest(&logdv1.CreateQueueGroupRequest{Topic: topic, Group: group,
		Config: &logdv1.QueueGroupConfig{MaxDeliveries: &one}})); err != nil {
		t.Fatal(err)
	}
	for rejected := 0; rejected < n; {
		// One record a claim, charged little: the caller's test
		// measures the peak its own calls reach.
		resp, err := rpc.Claim(ctx, connect.NewRequest(&logdv1.ClaimRequest{Topic: topic, Group: group, MaxRecords: 1, MaxBytes: 1, LeaseMs: 60_000}))
		if err != nil {
			t.Fatal(err)
		}
		nack := &logdv1.NackRequest{Topic: topic, Group: group}
		for _, r := range resp.Msg.Records {
			nack.Nacks = append(nack.Nacks, &logdv1.QueueNack{Token: r.Token, Permanent: true, Error: "rejected by the test"})
		}
		if _, err := rpc.Nack(ctx, connect.NewRequest(nack)); err != nil {
			t.Fatal(err)
		}
		rejected += len(resp.Msg.Records)
	}
	dlq := topic + "." + group + ".dlq"
	for {
		// One dead letter and a charge of a few bytes.
		resp, err := rpc.ListDeadLetters(ctx, connect.NewRequest(&logdv1.ListDeadLettersRequest{Topic: dlq, MaxRecords: 1, MaxBytes: 1}))
		if err == nil && resp.Msg.Total == int64(n) {
			return dlq
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s does not list %d dead letters: %v, %v", dlq, n, resp, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// backupCharge is what a backup in flight holds of the answer budget: a
// chunk and its encoded message (save_snapshot.go).
const backupCharge = 2 * 256 << 10

// TestBackupAnswerBudget: a backup holds its charge for as long as it
// streams. Backups whose client stops reading (a small HTTP/2 window
// holds them mid-stream) fill the client's share; the next one is
// refused with OVERLOADED and a retry-after; once one held backup is
// read to its end its charge is given back and a new backup is served.
// Without the charge (save_snapshot.go) the next backup is served at
// once, nothing is charged, and the test fails.
func TestBackupAnswerBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const (
		held = testShare / backupCharge
		// A stream's window: a backup of many windows stops mid-stream
		// while its client does not read.
		window = 64 << 10
	)
	hs, reg, _ := budgetServer(t, ctx, 50*time.Millisecond, 8)

	tr := &http.Transport{Protocols: new(http.Protocols), HTTP2: &http.HTTP2Config{MaxReceiveBufferPerStream: window}}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	h2 := logdv1connect.NewLogServiceClient(&http.Client{Transport: tr}, hs.URL)
	// start opens a backup and reads its first message, the header: the
	// backup is charged and streaming.
	start := func() (*connect.ServerStreamForClient[logdv1.SaveSnapshotResponse], error) {
		t.Helper()
		s, err := h2.SaveSnapshot(ctx, connect.NewRequest(&logdv1.SaveSnapshotRequest{}))
		if err != nil {
			return nil, err
		}
		if !s.Receive() {
			return nil, s.Err()
		}
		if s.Msg().Info == nil || s.Msg().Info.SizeBytes < 16*window {
			t.Fatalf("first message %v; want the header of a backup of at least %d bytes", s.Msg(), 16*window)
		}
		return s, nil
	}
	// drain reads a backup to its end.
	drain := func(s *connect.ServerStreamForClient[logdv1.SaveSnapshotResponse]) {
		t.Helper()
		for s.Receive() {
		}
		if err := s.Err(); err != nil {
			t.Fatalf("backup: %v", err)
		}
	}
	var streams []*connect.ServerStreamForClient[logdv1.SaveSnapshotResponse]
	defer func() {
		for _, s := range streams {
			s.Close()
		}
	}()
	for i := range held {
		s, err := start()
		if err != nil {
			t.Fatalf("backup %d of %d in flight: %v", i+1, held, err)
		}
		streams = append(streams, s)
	}
	if got := metric(t, reg, "logd_response_inflight_bytes"); got != held*backupCharge {
		t.Errorf("%d backups in flight hold %.0f bytes of the budget; want %d", held, got, held*backupCharge)
	}
	over, err := start()
	if over != nil {
		over.Close()
	}
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted || retryAfterOf(ce) <= 0 {
		t.Fatalf("backup past the client's share of %d bytes: %v; want OVERLOADED with a retry-after", testShare, err)
	}
	drain(streams[0])
	waitMetric(t, ctx, reg, "logd_response_inflight_bytes", func(v float64) bool { return v == (held-1)*backupCharge })
	s, err := start()
	if err != nil {
		t.Fatalf("backup once one held backup ended: %v", err)
	}
	streams[0] = s
	for _, s := range streams {
		drain(s)
	}
	peak := metric(t, reg, "logd_response_inflight_peak_bytes")
	t.Logf("%d backups in flight, one refused; peak %.0f bytes charged", held, peak)
	if peak != testShare {
		t.Errorf("peak charge %.0f bytes; want %d, the client's share", peak, testShare)
	}
	if got := metric(t, reg, "logd_response_budget_refusals_total"); got != 1 {
		t.Errorf("refusals metric %v; want 1", got)
	}
	waitMetric(t, ctx, reg, "logd_response_inflight_bytes", func(v float64) bool { return v == 0 })
}
