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
