package replication

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
)

// TestAppendDamagedBatch: a batch whose CRC does not hold is refused
// through Append, typed (backend.ErrInvalidArgument, and *batch.CRCError
// in the chain), with nothing of the call written and the node serving
// on: by the proposer when the front end did not verify it, and by the
// state machine when the front end said it did (the batch damaged after
// its check). Across nodes: TestDataGroupsServeTopics.
func TestAppendDamagedBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	b := openBackend(t, ctx, 2)
	good := mustBatch(t, "a", "b")
	damaged := append([]byte(nil), good...)
	damaged[len(damaged)-2] ^= 0x10
	for _, tc := range []struct {
		name     string
		verified bool
		// proposed: the refusal comes from Apply, so the append went
		// through Raft.
		proposed bool
	}{
		{name: "unverified, refused by the proposer"},
		{name: "said verified, refused by the state machine", verified: true, proposed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, applied := endOffsets(t, b, "t"), b.FSM().AppliedIndex()
			_, err := b.Append(ctx, backend.Append{Topic: "t", Verified: tc.verified,
				Batches: []backend.PartitionBatch{{Partition: 0, Batch: good}, {Partition: 1, Batch: damaged}}})
			var crc *batch.CRCError
			if !errors.Is(err, backend.ErrInvalidArgument) || !errors.As(err, &crc) {
				t.Fatalf("append of a damaged batch: %v, want backend.ErrInvalidArgument with a *batch.CRCError", err)
			}
			if after := endOffsets(t, b, "t"); after != before {
				t.Fatalf("end offsets %v after the refusal, %v before: something was written", after, before)
			}
			if got := b.FSM().AppliedIndex() > applied; got != tc.proposed {
				t.Errorf("applied index %d -> %d: proposed %v, want %v", applied, b.FSM().AppliedIndex(), got, tc.proposed)
			}
			if err := b.FSM().Failed(); err != nil {
				t.Fatalf("the state machine stopped: %v", err)
			}
			if _, err := b.Append(ctx, backend.Append{Topic: "t", Verified: tc.verified, Batches: []backend.PartitionBatch{{Partition: 1, Batch: good}}}); err != nil {
				t.Fatalf("a good append after the refusal: %v", err)
			}
		})
	}
}
