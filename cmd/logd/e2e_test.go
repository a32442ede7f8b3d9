package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/internal/e2e"
)

// The end-to-end tests run real logd processes through package
// internal/e2e, which builds logd once for the run.
func TestMain(m *testing.M) { e2e.Main(m) }

// TestKillUnderLoad SIGKILLs logd while concurrent producers write, three
// times, then checks every acknowledged record. The snapshot variant takes
// Raft snapshots every few entries during the run.
func TestKillUnderLoad(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{name: "no-snapshots", args: nil},
		{name: "snapshots", args: []string{"--snapshot-threshold", "16", "--snapshot-interval", "50ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			p := e2e.StartNode(t, tc.args...)
			const parts = 3
			e2e.CreateTopic(t, ctx, p, "e2e", parts, nil)
			ps := e2e.NewProducers(10)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for i := range 4 {
				wg.Add(1)
				go func() { defer wg.Done(); ps.Run(ctx, t, p.Listen, "e2e", i, stop) }()
			}
			for range 3 {
				ps.WaitAcks(t, ctx, "acks before a kill", 400)
				p.Kill()
				p.Start()
			}
			e2e.WaitFor(t, ctx, "1600 acks", func() bool { return ps.AckCount() >= 1600 })
			close(stop)
			wg.Wait()
			got := p.ReadAll(ctx, "e2e", parts)
			e2e.Check(t, got, ps.Acks, ps.Attempted)
			t.Logf("%d calls (%d failed or unknown), %d records acknowledged", ps.Calls, ps.Failed, len(ps.Acks))
		})
	}
}

// TestRestartTenTimes restarts logd ten times in a row, alternately with
// SIGTERM and SIGKILL; no offset or record changes.
func TestRestartTenTimes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := e2e.StartNode(t, "--snapshot-threshold", "8", "--snapshot-interval", "100ms")
	if _, err := p.RPC.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "r", Partitions: 2})); err != nil {
		t.Fatal(err)
	}
	var acks []e2e.Ack
	attempted := map[string]bool{}
	for i := 0; i < 40; i++ {
		req := &logdv1.ProduceRequest{Topic: "r"}
		for j := 0; j < 5; j++ {
			v := fmt.Sprintf("v%d-%d", i, j)
			attempted[v] = true
			req.Records = append(req.Records, &logdv1.Record{Value: []byte(v)})
		}
		resp, err := p.RPC.Produce(ctx, connect.NewRequest(req))
		if err != nil {
			t.Fatal(err)
		}
		for k, r := range resp.Msg.Results {
			acks = append(acks, e2e.Ack{Partition: r.Partition, Offset: r.Offset, Value: string(req.Records[k].Value)})
		}
	}
	want := e2e.Render(p.ReadAll(ctx, "r", 2))
	e2e.Check(t, p.ReadAll(ctx, "r", 2), acks, attempted)
	for i := 0; i < 10; i++ {
		if i%2 == 0 {
			p.Stop()
		} else {
			p.Kill()
		}
		p.Start()
		if got := e2e.Render(p.ReadAll(ctx, "r", 2)); got != want {
			t.Fatalf("restart %d changed the log:\n got %s\nwant %s", i+1, got, want)
		}
	}
	desc, err := p.RPC.DescribeTopic(ctx, connect.NewRequest(&logdv1.DescribeTopicRequest{Name: "r"}))
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, pi := range desc.Msg.Partitions {
		total += pi.EndOffset
	}
	if total != int64(len(acks)) {
		t.Fatalf("end offsets sum to %d, want %d", total, len(acks))
	}
}

// TestBadInput sends hostile requests; each gets a typed error and the next
// request works.
func TestBadInput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := e2e.StartNode(t)
	if _, err := p.RPC.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "ok", Partitions: 2, Config: map[string]string{"max.message.bytes": "1024"}})); err != nil {
		t.Fatal(err)
	}
	part := func(v int32) *int32 { return &v }
	for _, tc := range []struct {
		name   string
		call   func() error
		code   connect.Code
		reason logdv1.Reason
	}{
		{"path topic name", func() error {
			_, err := p.RPC.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "../x", Partitions: 1}))
			return err
		}, connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT},
		{"zero partitions", func() error {
			_, err := p.RPC.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "z", Partitions: 0}))
			return err
		}, connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT},
		{"unknown config", func() error {
			_, err := p.RPC.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "z", Partitions: 1, Config: map[string]string{"nope": "1"}}))
			return err
		}, connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT},
		{"topic exists", func() error {
			_, err := p.RPC.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "ok", Partitions: 1}))
			return err
		}, connect.CodeAlreadyExists, logdv1.Reason_REASON_TOPIC_EXISTS},
		{"unknown topic", func() error {
			_, err := p.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "nope", Records: []*logdv1.Record{{Value: []byte("x")}}}))
			return err
		}, connect.CodeNotFound, logdv1.Reason_REASON_UNKNOWN_TOPIC},
		{"oversized record", func() error {
			_, err := p.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "ok", Records: []*logdv1.Record{{Value: []byte("fine")}, {Value: make([]byte, 2048)}}}))
			return err
		}, connect.CodeInvalidArgument, logdv1.Reason_REASON_RECORD_TOO_LARGE},
		{"bad partition", func() error {
			_, err := p.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "ok", Records: []*logdv1.Record{{Value: []byte("fine")}, {Value: []byte("x"), Partition: part(7)}}}))
			return err
		}, connect.CodeNotFound, logdv1.Reason_REASON_UNKNOWN_PARTITION},
		{"no records", func() error {
			_, err := p.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "ok"}))
			return err
		}, connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT},
		{"negative offset", func() error {
			_, err := p.RPC.Fetch(ctx, connect.NewRequest(&logdv1.FetchRequest{Topic: "ok", Offset: -1}))
			return err
		}, connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT},
		{"offset past end", func() error {
			_, err := p.RPC.Fetch(ctx, connect.NewRequest(&logdv1.FetchRequest{Topic: "ok", Offset: 99}))
			return err
		}, connect.CodeOutOfRange, logdv1.Reason_REASON_OFFSET_OUT_OF_RANGE},
	} {
		err := tc.call()
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != tc.code {
			t.Errorf("%s: got %v, want code %v", tc.name, err, tc.code)
			continue
		}
		if r := e2e.ReasonOf(ce); r != tc.reason {
			t.Errorf("%s: reason %v, want %v", tc.name, r, tc.reason)
		}
	}
	// Nothing was written by the refused calls; the next call works.
	resp, err := p.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "ok", Records: []*logdv1.Record{{Value: []byte("after"), Partition: part(0)}}}))
	if err != nil {
		t.Fatal(err)
	}
	if off := resp.Msg.Results[0].Offset; off != 0 {
		t.Fatalf("first accepted record at offset %d: a refused call wrote something", off)
	}
	if _, err := p.RPC.DescribeTopic(ctx, connect.NewRequest(&logdv1.DescribeTopicRequest{Name: "z"})); err == nil {
		t.Fatal("refused create made a topic")
	}
}

// TestListOffsetsByTime checks the time-index lookup end to end.
func TestListOffsetsByTime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := e2e.StartNode(t)
	if _, err := p.RPC.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "tm", Partitions: 1})); err != nil {
		t.Fatal(err)
	}
	base := int64(1_700_000_000_000)
	for i := int64(0); i < 5; i++ {
		req := &logdv1.ProduceRequest{Topic: "tm", Records: []*logdv1.Record{{Value: []byte("x"), TimestampMs: base + i*1000}}}
		if _, err := p.RPC.Produce(ctx, connect.NewRequest(req)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ ts, want int64 }{{0, 0}, {base, 0}, {base + 1, 1}, {base + 4000, 4}, {base + 4001, 5}} {
		ts := tc.ts
		resp, err := p.RPC.ListOffsets(ctx, connect.NewRequest(&logdv1.ListOffsetsRequest{Topic: "tm", Partition: 0, TimestampMs: &ts}))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Msg.Offset != tc.want || resp.Msg.EndOffset != 5 {
			t.Errorf("ts %d: offset %d end %d, want %d end 5", tc.ts, resp.Msg.Offset, resp.Msg.EndOffset, tc.want)
		}
	}
}
