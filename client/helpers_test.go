package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
)

// fastRetry retries quickly so tests of retries take milliseconds.
var fastRetry = client.RetryPolicy{MaxAttempts: 4, InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}

// newTestClient starts a node and a client of it, both closed when the
// test ends.
func newTestClient(t *testing.T, opts client.Options) (*client.Client, *logdtest.Server) {
	t.Helper()
	return newTestClientOn(t, opts, logdtest.Options{})
}

// newTestClientOn is newTestClient with the node's options.
func newTestClientOn(t *testing.T, opts client.Options, node logdtest.Options) (*client.Client, *logdtest.Server) {
	t.Helper()
	srv := logdtest.Start(t, node)
	if opts.Retry.MaxAttempts == 0 && opts.Retry.OnRetry == nil {
		opts.Retry = fastRetry
	}
	c, err := client.New(srv.URL(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c, srv
}

// testContext returns a context that ends with the test or after 10s.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustCreate(t *testing.T, c *client.Client, name string, partitions int32) {
	t.Helper()
	if _, err := c.CreateTopic(testContext(t), name, partitions, nil); err != nil {
		t.Fatalf("CreateTopic(%q): %v", name, err)
	}
}
