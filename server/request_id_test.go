package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/replication/replicationtest"
	"github.com/logd-dev/logd/server"
)

// TestRequestID: every call gets a request id, the caller's when it sends
// a well-formed one (Request-Id or X-Request-Id), else a new one; the
// response echoes it, errors included, and the server's log lines for the
// call carry it.
func TestRequestID(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	n := replicationtest.Start(t, replicationtest.Options{RaftLogLevel: "off"})
	hs := httptest.NewServer(server.New(server.Options{Backend: n.Backend, Logger: logger}).Handler())
	defer hs.Close()
	c := logdv1connect.NewLogServiceClient(hs.Client(), hs.URL)
	made := regexp.MustCompile(`^[0-9a-f]{32}$`)

	for _, tc := range []struct {
		name   string
		header string // the request header, "" for none
		sent   string
		want   *regexp.Regexp
		topic  string
	}{
		{name: "given", header: server.RequestIDHeader, sent: "req-1", want: regexp.MustCompile(`^req-1$`), topic: "a"},
		{name: "given as X-Request-Id", header: server.XRequestIDHeader, sent: "req-2", want: regexp.MustCompile(`^req-2$`), topic: "b"},
		{name: "none", want: made, topic: "c"},
		{name: "with a space", header: server.RequestIDHeader, sent: "req 3", want: made, topic: "d"},
		{name: "too long", header: server.RequestIDHeader, sent: strings.Repeat("x", 129), want: made, topic: "e"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := connect.NewRequest(&logdv1.CreateTopicRequest{Name: tc.topic, Partitions: 1})
			if tc.header != "" {
				req.Header().Set(tc.header, tc.sent)
			}
			resp, err := c.CreateTopic(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			got := resp.Header().Values(server.RequestIDHeader)
			if len(got) != 1 || !tc.want.MatchString(got[0]) {
				t.Fatalf("response %s = %q, want one matching %s", server.RequestIDHeader, got, tc.want)
			}
			// The audit line and "topic created" both name the call.
			lines := 0
			for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				var m map[string]any
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				if m["request_id"] == got[0] {
					lines++
				}
			}
			if lines < 2 {
				t.Errorf("%d log lines carry request_id %s, want the audit line and \"topic created\":\n%s", lines, got[0], logs.String())
			}
		})
	}

	// An error answers with the id too.
	req := connect.NewRequest(&logdv1.FetchRequest{Topic: "nope"})
	req.Header().Set(server.RequestIDHeader, "req-err")
	_, err := c.Fetch(ctx, req)
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Meta().Get(server.RequestIDHeader) != "req-err" {
		t.Errorf("fetch of an unknown topic: %v, %s %q; want the id echoed", err, server.RequestIDHeader, ce.Meta().Get(server.RequestIDHeader))
	}
	// Plain HTTP paths get one as well.
	r, err := hs.Client().Get(hs.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if !made.MatchString(r.Header.Get(server.RequestIDHeader)) || r.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %d, %s %q", r.StatusCode, server.RequestIDHeader, r.Header.Get(server.RequestIDHeader))
	}
}
