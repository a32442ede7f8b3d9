package client_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
)

func TestParseServer(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr string
	}{
		{name: "host port", in: "127.0.0.1:7070", want: "http://127.0.0.1:7070"},
		{name: "hostname", in: "logd-0.logd:7070", want: "http://logd-0.logd:7070"},
		{name: "empty host", in: ":7070", want: "http://127.0.0.1:7070"},
		{name: "ipv6", in: "[::1]:7070", want: "http://[::1]:7070"},
		{name: "http url", in: "http://example.com:80/", want: "http://example.com:80"},
		{name: "https url with prefix", in: "https://example.com/logd/", want: "https://example.com/logd"},
		{name: "spaces trimmed", in: " 10.0.0.1:1 ", want: "http://10.0.0.1:1"},
		{name: "empty", in: "", wantErr: "empty"},
		{name: "no port", in: "localhost", wantErr: "host:port"},
		{name: "missing port", in: "localhost:", wantErr: "missing port"},
		{name: "bad scheme", in: "ftp://example.com", wantErr: "scheme"},
		{name: "no host", in: "http:///x", wantErr: "missing host"},
		{name: "query", in: "http://h:1/?a=b", wantErr: "query"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := client.ParseServer(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseServer(%q) = %q, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseServer(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		opts client.Options
		ok   bool
	}{
		{name: "zero", opts: client.Options{}, ok: true},
		{name: "explicit", opts: client.Options{Timeout: time.Second, Retry: client.RetryPolicy{MaxAttempts: 1}}, ok: true},
		{name: "negative timeout", opts: client.Options{Timeout: -1}},
		{name: "negative attempts", opts: client.Options{Retry: client.RetryPolicy{MaxAttempts: -1}}},
		{name: "max below initial", opts: client.Options{Retry: client.RetryPolicy{InitialBackoff: time.Second, MaxBackoff: time.Millisecond}}},
		{name: "overload wait", opts: client.Options{Retry: client.RetryPolicy{MaxAttempts: 1, MaxOverloadWait: time.Minute}}, ok: true},
		{name: "negative overload wait", opts: client.Options{Retry: client.RetryPolicy{MaxOverloadWait: -time.Second}}},
		{name: "fail overloaded and an overload wait", opts: client.Options{Retry: client.RetryPolicy{FailOverloaded: true, MaxOverloadWait: time.Second}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
			if _, err := client.New("127.0.0.1:1", tt.opts); (err == nil) != tt.ok {
				t.Fatalf("New() error = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestTopicLifecycle(t *testing.T) {
	c, _ := newTestClient(t, client.Options{})
	ctx := testContext(t)

	created, err := c.CreateTopic(ctx, "orders", 3, map[string]string{"retention.ms": "1000"})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	if created.Name != "orders" || created.Partitions != 3 || created.Config["retention.ms"] != "1000" || created.Created.IsZero() {
		t.Fatalf("CreateTopic = %+v", created)
	}
	if _, err := c.CreateTopic(ctx, "orders", 3, nil); !errors.Is(err, client.ErrTopicExists) {
		t.Fatalf("second CreateTopic error = %v, want ErrTopicExists", err)
	}
	mustCreate(t, c, "audit", 1)

	topics, err := c.ListTopics(ctx)
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	if len(topics) != 2 || topics[0].Name != "audit" || topics[1].Name != "orders" {
		t.Fatalf("ListTopics = %+v", topics)
	}

	d, err := c.DescribeTopic(ctx, "orders")
	if err != nil {
		t.Fatalf("DescribeTopic: %v", err)
	}
	if len(d.Partitions) != 3 || d.Partitions[2].Partition != 2 {
		t.Fatalf("DescribeTopic = %+v", d)
	}

	if err := c.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	if _, err := c.DescribeTopic(ctx, "orders"); !errors.Is(err, client.ErrUnknownTopic) {
		t.Fatalf("DescribeTopic after delete error = %v, want ErrUnknownTopic", err)
	}
	if err := c.DeleteTopic(ctx, "orders"); !errors.Is(err, client.ErrUnknownTopic) {
		t.Fatalf("DeleteTopic after delete error = %v, want ErrUnknownTopic", err)
	}
}

func TestProduceFetchRoundTrip(t *testing.T) {
	c, _ := newTestClient(t, client.Options{})
	ctx := testContext(t)
	mustCreate(t, c, "t", 2)

	one := int32(1)
	ts := time.UnixMilli(1_700_000_000_123)
	in := []client.Record{
		{Key: nil, Value: []byte("null key"), Partition: &one},
		{Key: []byte{}, Value: nil, Partition: &one},
		{Key: []byte("k"), Value: []byte("v"), Headers: []client.Header{{Key: "h", Value: []byte("x")}, {Key: "h", Value: nil}, {Key: "e", Value: []byte{}}}, Timestamp: ts, Partition: &one},
	}
	res, err := c.Produce(ctx, "t", in)
	if err != nil {
		t.Fatalf("Produce: %v", err)
	}
	want := []client.Result{{Partition: 1, Offset: 0}, {Partition: 1, Offset: 1}, {Partition: 1, Offset: 2}}
	if len(res) != len(want) {
		t.Fatalf("Produce = %+v, want %+v", res, want)
	}
	for i := range want {
		if res[i] != want[i] {
			t.Fatalf("Produce = %+v, want %+v", res, want)
		}
	}

	got, err := c.Fetch(ctx, client.FetchRequest{Topic: "t", Partition: 1, Offset: 0})
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if len(got.Records) != 3 || got.Next != 3 || got.End != 3 || got.LogStart != 0 {
		t.Fatalf("Fetch = %+v", got)
	}
	r0, r1, r2 := got.Records[0], got.Records[1], got.Records[2]
	if r0.Key != nil || string(r0.Value) != "null key" || r0.Timestamp.IsZero() || r0.Topic != "t" || r0.Partition != 1 {
		t.Errorf("record 0 = %+v", r0)
	}
	if r1.Key == nil || len(r1.Key) != 0 || r1.Value != nil {
		t.Errorf("record 1 = %+v, want empty key and null value", r1)
	}
	if !bytes.Equal(r2.Key, []byte("k")) || !r2.Timestamp.Equal(ts) || len(r2.Headers) != 3 || string(r2.Headers[0].Value) != "x" || r2.Offset != 2 {
		t.Errorf("record 2 = %+v", r2)
	}
	// A null header value and an empty one stay apart.
	if h := r2.Headers; len(h) == 3 && (h[1].Value != nil || h[2].Value == nil || len(h[2].Value) != 0) {
		t.Errorf("record 2 headers = %#v, want a null value then an empty one", h)
	}

	// Fetch at the end with no wait returns nothing and the same offset.
	empty, err := c.Fetch(ctx, client.FetchRequest{Topic: "t", Partition: 1, Offset: 3})
	if err != nil || len(empty.Records) != 0 || empty.Next != 3 {
		t.Fatalf("Fetch at end = %+v, %v", empty, err)
	}
}

func TestProduceKeyedRecordsShareAPartition(t *testing.T) {
	c, _ := newTestClient(t, client.Options{})
	ctx := testContext(t)
	mustCreate(t, c, "t", 8)
	var recs []client.Record
	for range 5 {
		recs = append(recs, client.Record{Key: []byte("customer-42"), Value: []byte("x")})
	}
	res, err := c.Produce(ctx, "t", recs)
	if err != nil {
		t.Fatalf("Produce: %v", err)
	}
	for i, r := range res {
		if r.Partition != res[0].Partition || r.Offset != int64(i) {
			t.Fatalf("Produce = %+v, want one partition with dense offsets", res)
		}
	}
}

func TestStatus(t *testing.T) {
	c, srv := newTestClient(t, client.Options{})
	st, err := c.Status(testContext(t))
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if st.NodeID == "" || st.State != "Leader" || st.LeaderID != st.NodeID || st.LeaderAddress != srv.Addr() || !st.Ready ||
		len(st.Members) != 1 || st.Members[0].Suffrage != "voter" || st.Members[0].APIAddress != srv.Addr() {
		t.Fatalf("Status = %+v", st)
	}
}
