package replication

// Helpers for tests of nodes and of the adapter over the state machine;
// package fsm's tests have their own.

import (
	"context"
	"testing"

	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/recordtest"
)

func mustBatch(t *testing.T, values ...string) []byte { return recordtest.Batch(t, values...) }

func mustBatchB(t testing.TB, values ...string) []byte { return recordtest.Batch(t, values...) }

func keyedBatch(t testing.TB, ts int64, kv ...string) []byte {
	return recordtest.KeyedBatch(t, ts, kv...)
}

// liveKV lists a partition's records as "offset:key=value".
func liveKV(t *testing.T, f *fsm.FSM, topic string) []string {
	t.Helper()
	p, err := f.Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	return recordtest.KeyValues(t, p.Log())
}

const qnow = int64(1_700_000_000_000_000_000)

// jobBatch builds records with values and, for values "late:*", a deadline
// header at qnow+1s.
func jobBatch(t *testing.T, values ...string) []byte { return recordtest.JobBatch(t, qnow, values...) }

// appendCommand proposes record batches as Backend.Append does, with
// nothing checked before (appendChecks), and returns each batch's base
// offset once committed and applied.
func (b *Backend) appendCommand(ctx context.Context, a fsm.Append) ([]int64, error) {
	return b.prod.appendBatches(ctx, a, 0)
}
