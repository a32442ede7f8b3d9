package client_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
)

// TestFetchModesConsumers: a Consumer and a GroupConsumer return the same
// records whether the client fetches batches (the default) or records
// (Options.FetchRecords), with MaxRecords cutting batches in their middle.
// (server/fetch_batches_test.go compares the two answers call by call.)
func TestFetchModesConsumers(t *testing.T) {
	c, srv := newTestClient(t, client.Options{})
	byRecords, err := client.New(srv.URL(), client.Options{FetchRecords: true, Retry: fastRetry})
	if err != nil {
		t.Fatal(err)
	}
	defer byRecords.Close()
	mustCreate(t, c, "t", 2)
	for part := range int32(2) {
		for call := range 3 {
			var recs []client.Record
			for i := range 5 {
				n := call*5 + i
				r := client.Record{Key: fmt.Appendf(nil, "k%d", n), Value: fmt.Appendf(nil, "v%d-%d", part, n), Partition: &part, Timestamp: time.UnixMilli(1e12 + int64(n))}
				if n%4 == 0 {
					r.Value = nil
					r.Headers = []client.Header{{Key: "null", Value: nil}, {Key: "n", Value: fmt.Appendf(nil, "%d", n)}}
				}
				recs = append(recs, r)
			}
			if _, err := c.Produce(testContext(t), "t", recs); err != nil {
				t.Fatal(err)
			}
		}
	}
	consume := func(c *client.Client) []client.FetchedRecord {
		t.Helper()
		var out []client.FetchedRecord
		for part := range int32(2) {
			cs, err := c.NewConsumer(client.ConsumerOptions{Topic: "t", Partition: part, Offset: 3, MaxRecords: 4})
			if err != nil {
				t.Fatal(err)
			}
			for len(out) < int(part+1)*12 {
				recs, err := cs.Poll(testContext(t))
				if err != nil || len(recs) == 0 || len(recs) > 4 {
					t.Fatalf("Poll: %d records, %v; want 1 to 4", len(recs), err)
				}
				out = append(out, recs...)
			}
		}
		return out
	}
	groupConsume := func(c *client.Client, group string) []client.FetchedRecord {
		t.Helper()
		gc := newGroupConsumer(t, c, client.GroupConsumerOptions{Group: group, Topics: []string{"t"}, MaxRecords: 3})
		out := pollValues(t, gc, 30)
		slices.SortFunc(out, func(a, b client.FetchedRecord) int {
			return int(a.Partition-b.Partition)*1000 + int(a.Offset-b.Offset)
		})
		return out
	}
	batches, records := consume(c), consume(byRecords)
	if len(batches) != 24 || !reflect.DeepEqual(batches, records) {
		t.Errorf("Consumer: %d records fetching batches, %d fetching records, or they differ:\n%+v\n%+v", len(batches), len(records), batches, records)
	}
	batches, records = groupConsume(c, "b"), groupConsume(byRecords, "r")
	if len(batches) != 30 || !reflect.DeepEqual(batches, records) {
		t.Errorf("GroupConsumer: %d records fetching batches, %d fetching records, or they differ:\n%+v\n%+v", len(batches), len(records), batches, records)
	}
	if r := batches[4]; r.Offset != 4 || r.Value != nil || len(r.Headers) != 2 || r.Headers[0].Value != nil || string(r.Headers[1].Value) != "4" {
		t.Errorf("record 0/4: %+v; want a null value and headers null and 4", r)
	}
}
