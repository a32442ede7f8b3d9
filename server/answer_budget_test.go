package server_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/server"
)

// TestResponseBudget: fetches asking for as much as they may, many at once
// over one HTTP/2 connection, are held to the answer budget: the bytes
// charged at once never pass the client's share of it (half the budget;
// every call here comes from one address), the fetches past it wait or
// are refused with OVERLOADED and a retry-after, and every charge is
// given back. With the budget switched off (InflightResponseBytes -1)
// the peak passes the share and nothing waits, and the test fails.
func TestResponseBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const (
		budget    = 4 << 20
		share     = budget / 2
		records   = 16
		recordLen = 256 << 10
		fetches   = 24
	)
	hs, reg := limitServer(t, ctx, server.Limits{InflightResponseBytes: budget, ResponseWait: 200 * time.Millisecond}, server.ConnLimits{})
	rpc := logdv1connect.NewLogServiceClient(hs.Client(), hs.URL)
	for range records {
		rec := &logdv1.Record{Value: make([]byte, recordLen)}
		if _, err := rpc.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "t", Records: []*logdv1.Record{rec}})); err != nil {
			t.Fatal(err)
		}
	}

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
	if peak <= 0 || peak > share {
		t.Errorf("peak charge %.0f bytes; want in (0, %d], the client's share of the budget", peak, share)
	}
	if waits == 0 {
		t.Errorf("no fetch waited: %d answers of up to %d bytes each fit in a share of %d at once", fetches, records*recordLen, share)
	}
	if served == 0 {
		t.Errorf("no fetch served")
	}
	if got := metric(t, reg, "logd_response_budget_refusals_total"); int(got) != refused {
		t.Errorf("refusals metric %v, %d refused", got, refused)
	}
	waitMetric(t, ctx, reg, "logd_response_inflight_bytes", func(v float64) bool { return v == 0 })
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
		budget  = 4 << 20
		share   = budget / 2
		records = 12
		claims  = 12
	)
	hs, reg := limitServer(t, ctx, server.Limits{InflightResponseBytes: budget, ResponseWait: 10 * time.Millisecond}, server.ConnLimits{})
	rpc := logdv1connect.NewLogServiceClient(hs.Client(), hs.URL)
	if _, err := rpc.CreateQueueGroup(ctx, connect.NewRequest(&logdv1.CreateQueueGroupRequest{Topic: "t", Group: "w"})); err != nil {
		t.Fatal(err)
	}
	for range records {
		rec := &logdv1.Record{Value: make([]byte, 256<<10)}
		if _, err := rpc.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "t", Records: []*logdv1.Record{rec}})); err != nil {
			t.Fatal(err)
		}
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
	if peak <= 0 || peak > share {
		t.Errorf("peak charge %.0f bytes; want in (0, %d]", peak, share)
	}
	waitMetric(t, ctx, reg, "logd_response_inflight_bytes", func(v float64) bool { return v == 0 })
}
