package client_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/client"
)

// deadLetterBase is the time the test's dead letters are dead-lettered
// around: a whole millisecond, each letter i at base + i ms + 0.5 ms.
var deadLetterBase = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// letter is a record the test writes to a dead-letter topic: a dead
// letter with the headers a queue group's state machine writes, or, with
// plain or no reason, a record a redrive job does not take for one.
type letter struct {
	part   int32
	reason string
	key    string
	plain  bool
}

// letterID is a written record's place and value.
type letterID struct {
	part  int32
	off   int64
	value string
}

// writeLetters produces ls to topic, letter i with value "id-<first+i>"
// dead-lettered at deadLetterBase + (first+i) ms + 0.5 ms, and returns
// where each went, in ls's order.
func writeLetters(t *testing.T, c *client.Client, topic string, first int, ls []letter) []letterID {
	t.Helper()
	recs := make([]client.Record, len(ls))
	for i, l := range ls {
		id := first + i
		recs[i] = client.Record{Value: []byte(fmt.Sprint("id-", id)), Partition: &ls[i].part}
		if l.key != "" {
			recs[i].Key = []byte(l.key)
		}
		if l.plain {
			continue
		}
		at := deadLetterBase.Add(time.Duration(id)*time.Millisecond + 500*time.Microsecond)
		recs[i].Headers = []client.Header{
			{Key: "app", Value: []byte("kept")},
			{Key: client.DLQHeaderReason, Value: []byte(l.reason)},
			{Key: client.DLQHeaderOriginTopic, Value: []byte("orders")},
			{Key: client.DLQHeaderOriginPart, Value: []byte(strconv.Itoa(int(l.part)))},
			{Key: client.DLQHeaderOriginOffset, Value: []byte(strconv.Itoa(id))},
			{Key: client.DLQHeaderGroup, Value: []byte("w")},
			{Key: client.DLQHeaderDeliveries, Value: []byte("2")},
			{Key: client.DLQHeaderError, Value: []byte("boom")},
			{Key: client.DLQHeaderTime, Value: []byte(at.Format(time.RFC3339Nano))},
		}
	}
	var out []letterID
	for from := 0; from < len(recs); from += 500 {
		res, err := c.Produce(testContext(t), topic, recs[from:min(from+500, len(recs))])
		if err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
		for i, r := range res {
			out = append(out, letterID{part: r.Partition, off: r.Offset, value: string(recs[from+i].Value)})
		}
	}
	return out
}

// listed lists topic's dead letters under f as "partition/offset value"
// lines, in the order listed, with each letter's checked fields.
func listed(t *testing.T, c *client.Client, topic string, f client.DeadLetterFilter) []string {
	t.Helper()
	var out []string
	err := c.ListDeadLetters(testContext(t), topic, f, func(d client.DeadLetter) error {
		if d.Topic != topic || d.OriginTopic != "orders" || d.Group != "w" || d.Deliveries != 2 || d.LastError != "boom" ||
			len(d.Headers) != 1 || d.Headers[0].Key != "app" || d.DeadLettered.Location() != time.UTC {
			t.Errorf("%s %d/%d: %+v", topic, d.Partition, d.Offset, d)
		}
		out = append(out, fmt.Sprintf("%d/%d %s", d.Partition, d.Offset, d.Value))
		return nil
	})
	if err != nil {
		t.Fatalf("list %s %+v: %v", topic, f, err)
	}
	return out
}

// TestListDeadLettersIsWhatRedriveMoves: dead letters of several reasons,
// keys and times in three partitions, with a plain record and one without
// a reason; under each filter logctl offers, ListDeadLetters lists the
// letters expected, in partition and offset order, and a redrive job of
// the same filter moves exactly those. The since bound falls inside a
// millisecond, where the server reads times to the millisecond.
func TestListDeadLettersIsWhatRedriveMoves(t *testing.T) {
	c, _ := newTestClient(t, client.Options{})
	ctx := testContext(t)
	mustCreate(t, c, "small.dlq", 3)
	reasons := []string{"rejected", "max_deliveries", "expired", "deadline_exceeded"}
	keys := []string{"k1", "k2", ""}
	var ls []letter
	for i := range 24 {
		ls = append(ls, letter{part: int32(i % 3), reason: reasons[i%4], key: keys[i/3%3]})
	}
	ls = append(ls, letter{part: 1, key: "k1", plain: true}, letter{part: 2, key: "k1", reason: ""})
	ids := writeLetters(t, c, "small.dlq", 0, ls)

	ms := func(d time.Duration) time.Time { return deadLetterBase.Add(d) }
	for n, tc := range []struct {
		name string
		f    client.DeadLetterFilter
		// want selects letter i (a dead letter, at base + i ms).
		want func(i int, l letter) bool
	}{
		{name: "all", want: func(int, letter) bool { return true }},
		{name: "reason", f: client.DeadLetterFilter{Reasons: []string{"rejected"}},
			want: func(_ int, l letter) bool { return l.reason == "rejected" }},
		{name: "reasons", f: client.DeadLetterFilter{Reasons: []string{"expired", "deadline_exceeded"}},
			want: func(_ int, l letter) bool { return l.reason == "expired" || l.reason == "deadline_exceeded" }},
		{name: "key", f: client.DeadLetterFilter{Key: "k1"}, want: func(_ int, l letter) bool { return l.key == "k1" }},
		{name: "since, inside a millisecond", f: client.DeadLetterFilter{Since: ms(5*time.Millisecond + 700*time.Microsecond)},
			want: func(i int, _ letter) bool { return i >= 5 }},
		{name: "until", f: client.DeadLetterFilter{Until: ms(12*time.Millisecond + 200*time.Microsecond)},
			want: func(i int, _ letter) bool { return i < 12 }},
		{name: "since and until", f: client.DeadLetterFilter{Since: ms(3 * time.Millisecond), Until: ms(20 * time.Millisecond)},
			want: func(i int, _ letter) bool { return i >= 3 && i < 20 }},
		{name: "key and reason", f: client.DeadLetterFilter{Key: "k2", Reasons: []string{"max_deliveries", "rejected"}},
			want: func(_ int, l letter) bool {
				return l.key == "k2" && (l.reason == "max_deliveries" || l.reason == "rejected")
			}},
	} {
		var want []letterID
		for i, l := range ls {
			if !l.plain && l.reason != "" && tc.want(i, l) {
				want = append(want, ids[i])
			}
		}
		slices.SortFunc(want, func(a, b letterID) int { return int(a.part-b.part)*1000 + int(a.off-b.off) })
		var wantLines, wantValues []string
		for _, id := range want {
			wantLines = append(wantLines, fmt.Sprintf("%d/%d %s", id.part, id.off, id.value))
			wantValues = append(wantValues, id.value)
		}
		if len(want) == 0 {
			t.Fatalf("%s: the case selects nothing", tc.name)
		}
		if got := listed(t, c, "small.dlq", tc.f); !slices.Equal(got, wantLines) {
			t.Errorf("%s: listed\n%v\nwant\n%v", tc.name, got, wantLines)
		}

		// The redrive job of the same filter, to a topic of its own (its
		// idempotency window is its own, so nothing is a duplicate).
		target := fmt.Sprint("moved-", n)
		mustCreate(t, c, target, 1)
		job, err := c.StartRedrive(ctx, client.RedriveOptions{DeadLetterTopic: "small.dlq", Target: target, Filter: tc.f})
		if err != nil {
			t.Fatal(err)
		}
		j, err := c.WaitRedrive(ctx, job.ID, 10*time.Millisecond, nil)
		if err != nil || j.State != client.RedriveDone {
			t.Fatalf("%s: redrive %+v, %v", tc.name, j, err)
		}
		var moved []string
		for off := int64(0); off < j.Progress.Redriven; {
			resp, err := c.Fetch(ctx, client.FetchRequest{Topic: target, Offset: off})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range resp.Records {
				moved = append(moved, string(r.Value))
			}
			off = resp.Next
		}
		slices.Sort(moved)
		slices.Sort(wantValues)
		if !slices.Equal(moved, wantValues) || j.Progress.Duplicates != 0 {
			t.Errorf("%s: the redrive moved %v (%+v), the list has %v", tc.name, moved, j.Progress, wantValues)
		}
	}
}

// TestListDeadLettersPages: more dead letters than the server answers at
// once (1,000), in two partitions with an empty one between, are listed
// once each, in order, by further calls; letters written after the
// listing began are left out, and fn's error stops it.
func TestListDeadLettersPages(t *testing.T) {
	c, _ := newTestClient(t, client.Options{})
	mustCreate(t, c, "big.dlq", 3)
	ids := writeLetters(t, c, "big.dlq", 0, bigLetters())
	var all, rejected []string
	for i, id := range ids {
		line := fmt.Sprintf("%d/%d %s", id.part, id.off, id.value)
		all = append(all, line)
		if i%2 == 0 {
			rejected = append(rejected, line)
		}
	}

	var got []string
	added := false
	err := c.ListDeadLetters(testContext(t), "big.dlq", client.DeadLetterFilter{}, func(d client.DeadLetter) error {
		if !added { // past the end offsets the listing started at
			added = true
			writeLetters(t, c, "big.dlq", len(ids), []letter{{part: 0, reason: "expired"}, {part: 2, reason: "expired"}})
		}
		got = append(got, fmt.Sprintf("%d/%d %s", d.Partition, d.Offset, d.Value))
		return nil
	})
	if err != nil || !slices.Equal(got, all) {
		t.Fatalf("listed %d (%v), want %d: first difference %s", len(got), err, len(all), firstDiff(got, all))
	}
	if got := listed(t, c, "big.dlq", client.DeadLetterFilter{Reasons: []string{"rejected"}, Until: deadLetterBase.Add(time.Hour)}); !slices.Equal(got, rejected) {
		t.Errorf("rejected: listed %d, want %d: first difference %s", len(got), len(rejected), firstDiff(got, rejected))
	}
	n, stop := 0, fmt.Errorf("enough")
	err = c.ListDeadLetters(testContext(t), "big.dlq", client.DeadLetterFilter{}, func(client.DeadLetter) error {
		if n++; n == 1500 {
			return stop
		}
		return nil
	})
	if err != stop || n != 1500 {
		t.Errorf("stopped by fn: %d letters, %v", n, err)
	}
}

// bigLetters are 1,500 dead letters in partition 0 and 1,100 in partition
// 2, rejected and max_deliveries in turn.
func bigLetters() []letter {
	var ls []letter
	for i := range 2600 {
		l := letter{part: 0, reason: "rejected", key: fmt.Sprint("k", i%7)}
		if i >= 1500 {
			l.part = 2
		}
		if i%2 == 1 {
			l.reason = "max_deliveries"
		}
		ls = append(ls, l)
	}
	return ls
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("at %d: %s, want %s", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("lengths %d, %d", len(got), len(want))
}

// oldNode serves a node's API through a proxy that answers ListDeadLetters
// as a build without the RPC does (404, which Connect reads as
// Unimplemented), after passing the first passFirst calls through.
func oldNode(t *testing.T, nodeURL string, passFirst int32) (*client.Client, *atomic.Int32) {
	t.Helper()
	u, err := url.Parse(nodeURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	proxy.Transport = tr
	calls := &atomic.Int32{}
	mux := http.NewServeMux()
	mux.Handle("/", proxy)
	mux.HandleFunc(logdv1connect.LogServiceListDeadLettersProcedure, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) > passFirst {
			http.NotFound(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(mux)
	c, err := client.New(srv.URL, client.Options{Retry: fastRetry})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		srv.Close()
		tr.CloseIdleConnections()
	})
	return c, calls
}

// TestListDeadLettersOnANodeWithoutTheRPC: against a node answering
// ListDeadLetters Unimplemented the client reads and filters the topic
// itself and lists what the node's own list does, from the start or,
// when an earlier page was answered, from where that page stopped.
func TestListDeadLettersOnANodeWithoutTheRPC(t *testing.T) {
	c, node := newTestClient(t, client.Options{})
	mustCreate(t, c, "small.dlq", 3)
	mustCreate(t, c, "big.dlq", 3)
	var ls []letter
	for i := range 12 {
		ls = append(ls, letter{part: int32(i % 3), reason: []string{"rejected", "expired"}[i%2], key: fmt.Sprint("k", i%3)})
	}
	ls = append(ls, letter{part: 1, key: "k1", plain: true}, letter{part: 2, key: "k1", reason: ""})
	writeLetters(t, c, "small.dlq", 0, ls)
	writeLetters(t, c, "big.dlq", 0, bigLetters())

	for _, tc := range []struct {
		name      string
		topic     string
		f         client.DeadLetterFilter
		passFirst int32
		calls     int32
	}{
		{name: "all", topic: "small.dlq", calls: 1},
		{name: "key and reason", topic: "small.dlq", f: client.DeadLetterFilter{Key: "k1", Reasons: []string{"expired"}}, calls: 1},
		{name: "since, inside a millisecond", topic: "small.dlq", f: client.DeadLetterFilter{Since: deadLetterBase.Add(5*time.Millisecond + 700*time.Microsecond)}, calls: 1},
		{name: "until", topic: "small.dlq", f: client.DeadLetterFilter{Until: deadLetterBase.Add(7 * time.Millisecond)}, calls: 1},
		{name: "pages", topic: "big.dlq", calls: 1},
		{name: "a page answered, then none", topic: "big.dlq", f: client.DeadLetterFilter{Reasons: []string{"max_deliveries"}}, passFirst: 1, calls: 2},
	} {
		old, calls := oldNode(t, node.URL(), tc.passFirst)
		want := listed(t, c, tc.topic, tc.f)
		if got := listed(t, old, tc.topic, tc.f); !slices.Equal(got, want) || len(want) == 0 {
			t.Errorf("%s: listed %d without the RPC, %d with it: first difference %s", tc.name, len(got), len(want), firstDiff(got, want))
		}
		if calls.Load() != tc.calls {
			t.Errorf("%s: %d ListDeadLetters calls, want %d", tc.name, calls.Load(), tc.calls)
		}
	}
}
