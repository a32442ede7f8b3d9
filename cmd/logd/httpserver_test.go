package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/logd-dev/logd/server"
)

// TestConnCaps: the connection cap stays below the open-file limit less
// the reserve, whatever --max-connections asks; 0 switches it off.
func TestConnCaps(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name                string
		maxConns, perIP, fd int64
		nofile              uint64
		want                server.ConnLimits
		err                 string
	}{
		{name: "auto: half the limit", maxConns: -1, perIP: 1024, fd: -1, nofile: 1024, want: server.ConnLimits{Max: 512}},
		{name: "auto with a large limit", maxConns: -1, perIP: 1024, fd: -1, nofile: 1 << 20, want: server.ConnLimits{Max: 1 << 19, MaxPerAddr: 1024}},
		{name: "explicit reserve", maxConns: -1, perIP: 100, fd: 224, nofile: 1024, want: server.ConnLimits{Max: 800, MaxPerAddr: 100}},
		{name: "explicit cap below the room", maxConns: 300, perIP: 100, fd: -1, nofile: 1024, want: server.ConnLimits{Max: 300, MaxPerAddr: 100}},
		{name: "explicit cap lowered to the room", maxConns: 5000, perIP: 100, fd: -1, nofile: 1024, want: server.ConnLimits{Max: 512, MaxPerAddr: 100}},
		{name: "unbounded", maxConns: 0, perIP: 0, fd: -1, nofile: 1024, want: server.ConnLimits{}},
		{name: "unknown limit", maxConns: -1, perIP: 10, fd: -1, nofile: 0, want: server.ConnLimits{MaxPerAddr: 10}},
		{name: "reserve leaves too little", maxConns: -1, fd: 1000, nofile: 1024, err: "fewer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := limitConfig{maxConns: tc.maxConns, maxConnsPerIP: tc.perIP, fdReserve: tc.fd}
			got, err := c.connCaps(tc.nofile, logger)
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("got %+v, %v; want an error with %q", got, err, tc.err)
			case tc.err == "" && (err != nil || got != tc.want):
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestLimitFlags: the defaults are on, 0 switches a bound off, and bad
// values are refused with the flag's name.
func TestLimitFlags(t *testing.T) {
	c, err := parseFlags(nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	l := c.limits
	if l.maxConns != -1 || l.fdReserve != -1 || l.maxRequestBytes != server.MaxRequestBytes || l.inflightBytes != server.DefaultInflightBytes ||
		l.bodyTimeout != server.DefaultBodyTimeout || l.maxTopics != defaultMaxTopics || l.maxHeaderBytes != defaultMaxHeaderBytes {
		t.Fatalf("defaults: %+v", l)
	}
	c, err = parseFlags([]string{"--max-inflight-request-bytes", "0", "--http-body-timeout", "0", "--max-topics", "0", "--max-partitions", "0"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if sl := c.limits.serverLimits(); sl.InflightBytes >= 0 || sl.BodyTimeout >= 0 || !c.limits.quota().IsZero() {
		t.Fatalf("0 should switch the bounds off: %+v, quota %+v", sl, c.limits.quota())
	}
	c, err = parseFlags([]string{"--max-topics-per-principal", "3", "--max-partitions-per-principal", "9"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if q := c.limits.quota(); q.MaxTopicsPerPrincipal != 3 || q.MaxPartitionsPerPrincipal != 9 || q.MaxTopics != defaultMaxTopics {
		t.Fatalf("per-principal quota flags: %+v", q)
	}
	for _, args := range [][]string{
		{"--max-topics-per-principal", "-1"},
		{"--max-connections", "many"},
		{"--http-idle-timeout", "-1s"},
		{"--max-request-bytes", "-5"},
		{"--max-inflight-request-bytes", "1000"}, // below the request bound
		{"--http-write-timeout", "30s"},          // below the longest long poll
	} {
		if _, err := parseFlags(args, func(string) string { return "" }, io.Discard); err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(args[0], "--")) && !strings.Contains(err.Error(), "limits") {
			t.Errorf("%v: %v, want an error naming the flag", args, err)
		}
	}
	// The answer budget and the HTTP/2 streams per connection.
	if l.inflightResponseBytes != server.DefaultInflightResponseBytes || l.maxStreams != defaultMaxStreams ||
		newHTTPServer(l, nil, slog.New(slog.DiscardHandler)).HTTP2.MaxConcurrentStreams != defaultMaxStreams {
		t.Fatalf("answer budget %d, streams %d: want the defaults", l.inflightResponseBytes, l.maxStreams)
	}
	c, err = parseFlags([]string{"--max-inflight-response-bytes", "0", "--max-concurrent-streams", "7"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if sl := c.limits.serverLimits(); sl.InflightResponseBytes >= 0 || newHTTPServer(c.limits, nil, slog.New(slog.DiscardHandler)).HTTP2.MaxConcurrentStreams != 7 {
		t.Fatalf("--max-inflight-response-bytes 0 should switch the budget off (%d), --max-concurrent-streams 7 set the cap", sl.InflightResponseBytes)
	}
	if _, err := parseFlags([]string{"--max-inflight-response-bytes", "1000"}, func(string) string { return "" }, io.Discard); err == nil || !strings.Contains(err.Error(), "response budget") {
		t.Errorf("an answer budget below a default fetch: %v, want an error", err)
	}
	c, err = parseFlags(nil, func(name string) string {
		if name == "LOGD_MAX_CONNECTIONS_PER_IP" {
			return "7"
		}
		return ""
	}, io.Discard)
	if err != nil || c.limits.maxConnsPerIP != 7 {
		t.Fatalf("environment: %+v, %v", c.limits, err)
	}
}
