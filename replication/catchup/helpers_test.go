package catchup

// Helpers for tests of catch-up over state machines in this process;
// tests that need a running node are package replication's.

import (
	"testing"

	"github.com/logd-dev/logd/replication/internal/recordtest"
)

func mustBatch(t *testing.T, values ...string) []byte { return recordtest.Batch(t, values...) }
