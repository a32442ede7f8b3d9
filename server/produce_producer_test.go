package server_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/logdtest"
	"github.com/logd-dev/logd/partition"
)

// The Connect API's Produce with a producer identity
// (ProduceRequest.producer): each partition's batch is judged by the
// partition's producer state, Kafka's idempotent producer rules
// (docs/kafka.md, "Idempotent producers").

// producerNode starts a node with topic "t" of two partitions and returns
// a raw API client of it and a producer id it handed out.
func producerNode(t *testing.T, opts logdtest.Options) (logdv1connect.LogServiceClient, int64) {
	t.Helper()
	node := logdtest.Start(t, opts)
	api := logdv1connect.NewLogServiceClient(http.DefaultClient, node.URL())
	ctx := t.Context()
	if _, err := api.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "t", Partitions: 2})); err != nil {
		t.Fatal(err)
	}
	if opts.FeatureLevel != 0 {
		return api, 0
	}
	if opts.DataGroupsPerNode > 0 {
		d, err := api.DescribeTopic(ctx, connect.NewRequest(&logdv1.DescribeTopicRequest{Name: "t"}))
		if err != nil {
			t.Fatal(err)
		}
		if p := d.Msg.Partitions; len(p) != 2 || p[0].DataGroup == 0 || p[0].DataGroup == p[1].DataGroup {
			t.Fatalf("partitions %v: want each in a data group of its own", p)
		}
	}
	id, err := api.InitProducerId(ctx, connect.NewRequest(&logdv1.InitProducerIdRequest{Topic: "t"}))
	if err != nil {
		t.Fatal(err)
	}
	return api, id.Msg.ProducerId
}

// seqRecords are records of values on partitions, one partition per
// letter of parts ("0" or "1").
func seqRecords(parts string, values ...string) []*logdv1.Record {
	recs := make([]*logdv1.Record, len(values))
	for i, v := range values {
		p := int32(parts[i] - '0')
		recs[i] = &logdv1.Record{Value: []byte(v), Partition: &p}
	}
	return recs
}

// produceStep is one call of a producer's script and what it must get:
// the records' offsets (and whether they are duplicates), or a refusal.
type produceStep struct {
	name   string
	epoch  int32
	seqs   map[int32]int32
	recs   []*logdv1.Record
	offs   []int64
	dups   []bool
	reason logdv1.Reason
	code   connect.Code
}

// TestProduceProducerSequences: a producer's script on the Connect path,
// through the same state the Kafka listener's producers use: batches in
// sequence are written, a repeat of one of the last is answered with its
// original offsets and written nowhere, a gap or an overlap is
// OUT_OF_ORDER_SEQUENCE, a new epoch starts at 0 and fences the old one,
// and a refused partition does not stop the call's other partitions.
// The same on a topic placed over data groups, where each group's leader
// judges its partitions' batches.
func TestProduceProducerSequences(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts logdtest.Options
	}{
		{name: "meta group"},
		{name: "data groups", opts: logdtest.Options{DataGroupsPerNode: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) { produceProducerSequences(t, tc.opts) })
	}
}

func produceProducerSequences(t *testing.T, opts logdtest.Options) {
	api, id := producerNode(t, opts)
	key := keyOn(1)
	steps := []produceStep{
		{name: "first batch", seqs: map[int32]int32{0: 0}, recs: seqRecords("000", "a", "b", "c"), offs: []int64{0, 1, 2}},
		{name: "next in sequence", seqs: map[int32]int32{0: 3}, recs: seqRecords("00", "d", "e"), offs: []int64{3, 4}},
		{name: "repeat of the last", seqs: map[int32]int32{0: 3}, recs: seqRecords("00", "d", "e"), offs: []int64{3, 4}, dups: []bool{true, true}},
		{name: "repeat of an earlier one", seqs: map[int32]int32{0: 0}, recs: seqRecords("000", "a", "b", "c"), offs: []int64{0, 1, 2}, dups: []bool{true, true, true}},
		{name: "gap", seqs: map[int32]int32{0: 9}, recs: seqRecords("0", "x"), reason: logdv1.Reason_REASON_OUT_OF_ORDER_SEQUENCE, code: connect.CodeAborted},
		{name: "overlap", seqs: map[int32]int32{0: 4}, recs: seqRecords("00", "x", "y"), reason: logdv1.Reason_REASON_OUT_OF_ORDER_SEQUENCE, code: connect.CodeAborted},
		{name: "a partition that does not know the producer takes any sequence", seqs: map[int32]int32{1: 7}, recs: seqRecords("1", "p"), offs: []int64{0}},
		{name: "one partition refused, the other written", seqs: map[int32]int32{0: 5, 1: 20}, recs: seqRecords("01", "f", "x"), reason: logdv1.Reason_REASON_OUT_OF_ORDER_SEQUENCE, code: connect.CodeAborted},
		{name: "the written one again, its partner in sequence", seqs: map[int32]int32{0: 5, 1: 8}, recs: seqRecords("01", "f", "q"), offs: []int64{5, 1}, dups: []bool{true, false}},
		{name: "a keyed record goes by its key", seqs: map[int32]int32{1: 9}, recs: []*logdv1.Record{{Key: key, Value: []byte("g")}}, offs: []int64{2}},
		{name: "a new epoch not at 0", epoch: 1, seqs: map[int32]int32{0: 6}, recs: seqRecords("0", "x"), reason: logdv1.Reason_REASON_OUT_OF_ORDER_SEQUENCE, code: connect.CodeAborted},
		{name: "a new epoch at 0", epoch: 1, seqs: map[int32]int32{0: 0}, recs: seqRecords("0", "h"), offs: []int64{6}},
		{name: "the old epoch fenced", seqs: map[int32]int32{0: 6}, recs: seqRecords("0", "x"), reason: logdv1.Reason_REASON_INVALID_PRODUCER_EPOCH, code: connect.CodeFailedPrecondition},
	}
	for _, s := range steps {
		resp, err := api.Produce(t.Context(), connect.NewRequest(&logdv1.ProduceRequest{Topic: "t", Records: s.recs,
			Producer: &logdv1.ProducerSequence{ProducerId: id, ProducerEpoch: s.epoch, BaseSequences: s.seqs}}))
		if s.code != 0 {
			if connect.CodeOf(err) != s.code || reasonOf(err) != s.reason {
				t.Fatalf("%s: %v (reason %v), want %v %v", s.name, err, reasonOf(err), s.code, s.reason)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if !resp.Msg.ProducerChecked {
			t.Errorf("%s: answered without producer_checked", s.name)
		}
		for i, r := range resp.Msg.Results {
			dup := s.dups != nil && s.dups[i]
			if r.Offset != s.offs[i] || r.Duplicate != dup {
				t.Fatalf("%s: record %d at %d (duplicate %v), want %d (%v)", s.name, i, r.Offset, r.Duplicate, s.offs[i], dup)
			}
		}
	}
	// Nothing was written twice, nothing refused was written.
	want := map[int32][]string{0: {"a", "b", "c", "d", "e", "f", "h"}, 1: {"p", "q", "g"}}
	for part, vals := range want {
		if got := partitionValues(t, api, part); !slices.Equal(got, vals) {
			t.Errorf("partition %d holds %q, want %q", part, got, vals)
		}
	}
}

// TestProduceProducerRefused: a producer identity the call cannot carry
// is INVALID_ARGUMENT, and nothing is written; a call without one is
// answered as before, unchecked; below the feature level of idempotent
// producers a call with one is refused.
func TestProduceProducerRefused(t *testing.T) {
	api, id := producerNode(t, logdtest.Options{})
	one := func(seq int32) map[int32]int32 { return map[int32]int32{0: seq} }
	for _, tc := range []struct {
		name string
		recs []*logdv1.Record
		pr   *logdv1.ProducerSequence
	}{
		{name: "idempotency key", recs: []*logdv1.Record{{Value: []byte("x"), Partition: new(int32), IdempotencyKey: "k"}}, pr: &logdv1.ProducerSequence{ProducerId: id, BaseSequences: one(0)}},
		{name: "neither partition nor key", recs: []*logdv1.Record{{Value: []byte("x")}}, pr: &logdv1.ProducerSequence{ProducerId: id, BaseSequences: one(0)}},
		{name: "no sequence for the partition", recs: seqRecords("1", "x"), pr: &logdv1.ProducerSequence{ProducerId: id, BaseSequences: one(0)}},
		{name: "a sequence for a partition without records", recs: seqRecords("0", "x"), pr: &logdv1.ProducerSequence{ProducerId: id, BaseSequences: map[int32]int32{0: 0, 1: 0}}},
		{name: "no sequences", recs: seqRecords("0", "x"), pr: &logdv1.ProducerSequence{ProducerId: id}},
		{name: "negative sequence", recs: seqRecords("0", "x"), pr: &logdv1.ProducerSequence{ProducerId: id, BaseSequences: one(-1)}},
		{name: "negative epoch", recs: seqRecords("0", "x"), pr: &logdv1.ProducerSequence{ProducerId: id, ProducerEpoch: -1, BaseSequences: one(0)}},
		{name: "epoch past int16", recs: seqRecords("0", "x"), pr: &logdv1.ProducerSequence{ProducerId: id, ProducerEpoch: 1 << 15, BaseSequences: one(0)}},
		{name: "negative producer id", recs: seqRecords("0", "x"), pr: &logdv1.ProducerSequence{ProducerId: -1, BaseSequences: one(0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := api.Produce(t.Context(), connect.NewRequest(&logdv1.ProduceRequest{Topic: "t", Records: tc.recs, Producer: tc.pr}))
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("error %v, want INVALID_ARGUMENT", err)
			}
		})
	}
	for part := range int32(2) {
		if got := partitionValues(t, api, part); len(got) != 0 {
			t.Fatalf("partition %d holds %q after refusals", part, got)
		}
	}
	resp, err := api.Produce(t.Context(), connect.NewRequest(&logdv1.ProduceRequest{Topic: "t", Records: seqRecords("0", "plain")}))
	if err != nil || resp.Msg.ProducerChecked || resp.Msg.Results[0].Offset != 0 {
		t.Fatalf("a call without a producer: %v, %v", resp, err)
	}

	old, _ := producerNode(t, logdtest.Options{FeatureLevel: backend.FeatureLevel(10)})
	_, err = old.Produce(t.Context(), connect.NewRequest(&logdv1.ProduceRequest{Topic: "t", Records: seqRecords("0", "x"),
		Producer: &logdv1.ProducerSequence{ProducerId: 1, BaseSequences: one(0)}}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("below the feature level: %v, want FAILED_PRECONDITION", err)
	}
}

// partitionValues reads every value of a partition of topic "t".
func partitionValues(t *testing.T, api logdv1connect.LogServiceClient, part int32) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := api.Fetch(ctx, connect.NewRequest(&logdv1.FetchRequest{Topic: "t", Partition: part}))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range resp.Msg.Records {
		out = append(out, string(r.Value))
	}
	return out
}

// keyOn returns a key murmur2 puts on partition part of two.
func keyOn(part int32) []byte {
	for i := 0; ; i++ {
		if k := fmt.Appendf(nil, "k%d", i); partition.ForKey(k, 2) == part {
			return k
		}
	}
}
