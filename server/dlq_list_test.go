package server_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
)

// TestListDeadLetters: real dead letters (a queue group allowing one
// delivery: rejected ones and one failed, one of them redriven and
// rejected again) listed with each of a redrive's filters, the loop guard
// marking the redriven one at max_redrives 1, the bounds, and bad input
// refused.
func TestListDeadLetters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node := logdtest.Start(t, logdtest.Options{})
	c, err := client.New(node.URL(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateQueueGroup(ctx, "orders", "w", client.QueueGroupConfig{MaxDeliveries: 1}, false); err != nil {
		t.Fatal(err)
	}
	// fail claims n records and nacks each: permanently but the last.
	fail := func(n int, transientLast bool) {
		t.Helper()
		res, err := c.Claim(ctx, client.ClaimRequest{Topic: "orders", Group: "w", MaxRecords: n})
		if err != nil || len(res.Jobs) != n {
			t.Fatalf("claim %d: %+v, %v", n, res, err)
		}
		var nacks []client.Nack
		for i, j := range res.Jobs {
			nacks = append(nacks, client.Nack{Token: j.Token, Permanent: !transientLast || i < n-1, Error: fmt.Sprint("e", i)})
		}
		if _, err := c.Nack(ctx, "orders", "w", nacks...); err != nil {
			t.Fatal(err)
		}
	}
	var recs []client.Record
	for i := range 3 {
		recs = append(recs, client.Record{Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint("v", i)),
			Headers: []client.Header{{Key: "app", Value: []byte("kept")}}})
	}
	if _, err := c.Produce(ctx, "orders", recs); err != nil {
		t.Fatal(err)
	}
	fail(3, true) // dead letters 0/0, 0/1 rejected; 0/2 max_deliveries
	job, err := c.StartRedrive(ctx, client.RedriveOptions{DeadLetterTopic: "orders.w.dlq", Records: []client.DeadLetterRef{{Partition: 0, Offset: 0}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitRedrive(ctx, job.ID, 0, nil); err != nil {
		t.Fatal(err)
	}
	fail(1, false) // dead letter 0/3: k0 again, rejected, redriven once

	api := logdv1connect.NewLogServiceClient(http.DefaultClient, node.URL())
	list := func(m *logdv1.ListDeadLettersRequest) (*logdv1.ListDeadLettersResponse, error) {
		m.Topic = "orders.w.dlq"
		resp, err := api.ListDeadLetters(ctx, connect.NewRequest(m))
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	}
	for _, tc := range []struct {
		name      string
		req       *logdv1.ListDeadLettersRequest
		offsets   []int64
		refused   []int64
		truncated bool
		total     int64 // 0: 4
	}{
		{name: "all", req: &logdv1.ListDeadLettersRequest{}, offsets: []int64{0, 1, 2, 3}},
		{name: "reason", req: &logdv1.ListDeadLettersRequest{Reasons: []string{"max_deliveries"}}, offsets: []int64{2}},
		{name: "key", req: &logdv1.ListDeadLettersRequest{Key: []byte("k0"), HasKey: true}, offsets: []int64{0, 3}},
		{name: "empty key", req: &logdv1.ListDeadLettersRequest{HasKey: true}},
		{name: "offsets", req: &logdv1.ListDeadLettersRequest{FromOffset: 1, ToOffset: 3}, offsets: []int64{1, 2}, total: 2},
		{name: "time", req: &logdv1.ListDeadLettersRequest{UntilMs: time.Now().Add(-time.Hour).UnixMilli()}},
		{name: "loop guard", req: &logdv1.ListDeadLettersRequest{MaxRedrives: 1}, offsets: []int64{0, 1, 2, 3}, refused: []int64{3}},
		{name: "max records", req: &logdv1.ListDeadLettersRequest{MaxRecords: 2}, offsets: []int64{0, 1}, truncated: true},
		{name: "max bytes: one at least", req: &logdv1.ListDeadLettersRequest{MaxBytes: 1}, offsets: []int64{0}, truncated: true},
		{name: "max scan", req: &logdv1.ListDeadLettersRequest{MaxScan: 3, Reasons: []string{"rejected"}}, offsets: []int64{0, 1}, truncated: true},
	} {
		resp, err := list(tc.req)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var offsets, refused []int64
		for _, d := range resp.DeadLetters {
			offsets = append(offsets, d.Offset)
			if d.Refused {
				refused = append(refused, d.Offset)
			}
		}
		if tc.total == 0 {
			tc.total = 4
		}
		if !slices.Equal(offsets, tc.offsets) || !slices.Equal(refused, tc.refused) || resp.Truncated != tc.truncated || resp.Total != tc.total {
			t.Errorf("%s: offsets %v refused %v truncated %v total %d; want %v, %v, %v, %d", tc.name, offsets, refused, resp.Truncated, resp.Total,
				tc.offsets, tc.refused, tc.truncated, tc.total)
		}
	}
	// Paging: each answer's next_offsets and end_offsets continue it, up
	// to the ends of the first; a dead letter added meanwhile is left out.
	var paged []int64
	page := &logdv1.ListDeadLettersRequest{MaxRecords: 1}
	for i := 0; ; i++ {
		resp, err := list(page)
		if err != nil || i > 5 {
			t.Fatalf("page %d: %+v, %v", i, resp, err)
		}
		for _, d := range resp.DeadLetters {
			paged = append(paged, d.Offset)
		}
		if !resp.Truncated {
			if !slices.Equal(resp.NextOffsets, []int64{4}) || !slices.Equal(resp.EndOffsets, []int64{4}) {
				t.Errorf("last page: next %v end %v, want [4] [4]", resp.NextOffsets, resp.EndOffsets)
			}
			break
		}
		if i == 0 { // dead letter 0/4, past the first answer's end
			if _, err := c.Produce(ctx, "orders", []client.Record{{Key: []byte("k3"), Value: []byte("v3")}}); err != nil {
				t.Fatal(err)
			}
			fail(1, false)
		}
		page = &logdv1.ListDeadLettersRequest{MaxRecords: 1, FromOffsets: resp.NextOffsets, ToOffsets: resp.EndOffsets}
	}
	if !slices.Equal(paged, []int64{0, 1, 2, 3}) {
		t.Errorf("paged by one: %v, want [0 1 2 3]", paged)
	}

	resp, err := list(&logdv1.ListDeadLettersRequest{FromOffset: 3, ToOffset: 4})
	if err != nil || len(resp.DeadLetters) != 1 {
		t.Fatalf("dead letter 0/3: %+v, %v", resp, err)
	}
	d := resp.DeadLetters[0]
	if d.Reason != "rejected" || d.Error != "e0" || d.OriginTopic != "orders" || d.OriginOffset != 3 || d.Group != "w" || d.Deliveries != 1 ||
		d.Redrives != 1 || string(d.Key) != "k0" || string(d.Value) != "v0" || d.DeadLetteredMs == 0 || d.FirstDeliveryMs == 0 || d.History == "" {
		t.Errorf("dead letter 0/3: %+v", d)
	}
	var own []string
	for _, h := range d.Headers {
		own = append(own, h.Key)
	}
	if !slices.Contains(own, "app") || slices.ContainsFunc(own, func(k string) bool { return len(k) > 9 && k[:9] == "logd-dlq-" }) {
		t.Errorf("dead letter 0/3 headers %v: want its own (app, logd-redrive-*), no logd-dlq-*", own)
	}

	for _, tc := range []struct {
		name string
		req  *logdv1.ListDeadLettersRequest
		code connect.Code
	}{
		{name: "offsets", req: &logdv1.ListDeadLettersRequest{FromOffset: 3, ToOffset: 2}, code: connect.CodeInvalidArgument},
		{name: "time", req: &logdv1.ListDeadLettersRequest{SinceMs: -1}, code: connect.CodeInvalidArgument},
		{name: "max records", req: &logdv1.ListDeadLettersRequest{MaxRecords: 10_001}, code: connect.CodeInvalidArgument},
		{name: "max bytes", req: &logdv1.ListDeadLettersRequest{MaxBytes: 16<<20 + 1}, code: connect.CodeInvalidArgument},
		{name: "from_offsets: one per partition", req: &logdv1.ListDeadLettersRequest{FromOffsets: []int64{0, 0}}, code: connect.CodeInvalidArgument},
		{name: "to_offsets: negative", req: &logdv1.ListDeadLettersRequest{ToOffsets: []int64{-1}}, code: connect.CodeInvalidArgument},
	} {
		if _, err := list(tc.req); connect.CodeOf(err) != tc.code {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.code)
		}
	}
	if _, err := api.ListDeadLetters(ctx, connect.NewRequest(&logdv1.ListDeadLettersRequest{Topic: "nope"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("unknown topic: %v, want NOT_FOUND", err)
	}
}
