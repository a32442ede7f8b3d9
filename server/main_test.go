package server_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// hashicorp/raft's and bbolt's background goroutines end shortly
		// after Shutdown returns.
		goleak.IgnoreTopFunction("github.com/hashicorp/raft.(*NetworkTransport).listen"),
		goleak.IgnoreTopFunction("github.com/armon/go-metrics.(*InmemSink).run"),
		goleak.IgnoreTopFunction("github.com/hashicorp/go-metrics.(*InmemSink).run"),
	)
}
