package raftstore

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that closed stores leave no goroutine behind (raft-wal
// runs one until Close).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
