package client_test

import (
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
)

func TestDeadLetterParseAndFilter(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	rec := client.FetchedRecord{Topic: "jobs.w.dlq", Offset: 7, Key: []byte("k1"), Value: []byte("v"), Headers: []client.Header{
		{Key: "job", Value: []byte("x")},
		{Key: client.RedriveCountHeader, Value: []byte("2")},
		{Key: client.DLQHeaderReason, Value: []byte("max_deliveries")},
		{Key: client.DLQHeaderOriginTopic, Value: []byte("jobs")},
		{Key: client.DLQHeaderOriginPart, Value: []byte("1")},
		{Key: client.DLQHeaderOriginOffset, Value: []byte("42")},
		{Key: client.DLQHeaderDeliveries, Value: []byte("5")},
		{Key: client.DLQHeaderTime, Value: []byte(at.Format(time.RFC3339Nano))},
	}}
	d, ok := client.ParseDeadLetter(rec)
	if !ok || d.Reason != "max_deliveries" || d.OriginPartition != 1 || d.OriginOffset != 42 || d.Deliveries != 5 || d.Redrives != 2 ||
		!d.DeadLettered.Equal(at) || len(d.Headers) != 2 {
		t.Fatalf("parsed %+v ok=%v", d, ok)
	}
	if _, ok := client.ParseDeadLetter(client.FetchedRecord{Value: []byte("plain")}); ok {
		t.Fatal("a record without dead-letter headers parsed")
	}
	for _, tc := range []struct {
		name string
		f    client.DeadLetterFilter
		want bool
	}{
		{name: "all", want: true},
		{name: "reason", f: client.DeadLetterFilter{Reasons: []string{"rejected", "max_deliveries"}}, want: true},
		{name: "other reason", f: client.DeadLetterFilter{Reasons: []string{"rejected"}}},
		{name: "since, inclusive", f: client.DeadLetterFilter{Since: at}, want: true},
		{name: "until, exclusive", f: client.DeadLetterFilter{Until: at}},
		{name: "key", f: client.DeadLetterFilter{Key: "k1"}, want: true},
		{name: "other key", f: client.DeadLetterFilter{Key: "k2"}},
	} {
		if got := tc.f.Match(d); got != tc.want {
			t.Errorf("%s: Match = %v, want %v", tc.name, got, tc.want)
		}
	}
	if k := client.RedriveIdempotencyKey(d, 3); k != "jobs/1/42#redrive-3" {
		t.Errorf("derived key %q", k)
	}
	d.IdempotencyKey = "pay-7"
	if k := client.RedriveIdempotencyKey(d, 1); k != "pay-7#redrive-1" {
		t.Errorf("key from the original %q", k)
	}
	if a, b := client.RedrivePositionGroup("t", client.DeadLetterFilter{}), client.RedrivePositionGroup("t", client.DeadLetterFilter{Key: "k"}); a == b {
		t.Error("filters share a redrive position")
	}
}
