package replication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/dedup"
	"github.com/logd-dev/logd/replication/fsm"
)

// sampleCalls are calls the binary form carries, as produceSpread,
// produceInGroup and appendInGroup send them.
func sampleCalls() []struct {
	name string
	call groupCall
} {
	digest := dedup.Digest{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	return []struct {
		name string
		call groupCall
	}{
		{name: "keyless records with their partitions", call: groupCall{Kind: callProduce, MetaIndex: 42, Produce: &backend.ProduceRequest{Topic: "orders", Records: []backend.ProduceRecord{
			{Partition: 3, HasPartition: true, Value: []byte("one")},
			{Partition: 3, HasPartition: true, Value: []byte("two")},
			{Partition: 7, HasPartition: true, Value: make([]byte, 300)},
		}}}},
		{name: "keys, headers, timestamps, nil and empty", call: groupCall{Kind: callProduce, MetaIndex: 1 << 40, MinApplied: 9, Produce: &backend.ProduceRequest{Topic: "t", Records: []backend.ProduceRecord{
			{Key: []byte("k"), Value: nil, TimestampMs: 1733570000123},
			{Key: []byte{}, Value: []byte{}, Headers: []batch.Header{}},
			{Key: nil, Value: []byte("v"), Headers: []batch.Header{{Key: "h", Value: nil}, {Key: "", Value: []byte{}}, {Key: "trace", Value: []byte("abc")}}},
			{Partition: -1, TimestampMs: -5, Value: []byte("invalid, refused by the leader as here")},
			{Partition: 2, HasPartition: false, Value: []byte("a partition without HasPartition")},
		}}}},
		{name: "idempotency keys", call: groupCall{Kind: callProduce, Produce: &backend.ProduceRequest{Topic: "payments", Records: []backend.ProduceRecord{
			{IdempotencyKey: "order-2026-12-07-0001", Value: []byte("a"), Partition: 1, HasPartition: true},
			{IdempotencyKey: "order-2026-12-07-0001", Value: []byte("a"), Partition: 1, HasPartition: true},
			{IdempotencyKey: "ключ", Key: []byte("k2"), Value: []byte("b"), Partition: 0, HasPartition: true},
		}}}},
		{name: "an idempotent producer", call: groupCall{Kind: callProduce, Produce: &backend.ProduceRequest{Topic: "p",
			Producer: &backend.ProducerSequence{ID: 1 << 50, Epoch: -3, BaseSequences: map[int32]int32{0: 17, 5: 0, 11: 2147483647}},
			Records:  []backend.ProduceRecord{{Partition: 0, HasPartition: true, Value: []byte("x")}, {Partition: 11, HasPartition: true, Key: []byte("y")}, {Partition: 5, HasPartition: true}},
		}}},
		{name: "a producer with no sequences", call: groupCall{Kind: callProduce, Produce: &backend.ProduceRequest{Topic: "p", Producer: &backend.ProducerSequence{ID: 7, BaseSequences: map[int32]int32{}}}}},
		{name: "a producer with nil sequences", call: groupCall{Kind: callProduce, Produce: &backend.ProduceRequest{Topic: "p", Producer: &backend.ProducerSequence{ID: 7}, Records: []backend.ProduceRecord{}}}},
		{name: "no records", call: groupCall{Kind: callProduce, Produce: &backend.ProduceRequest{}}},
		{name: "an append with keys", call: groupCall{Kind: callAppend, MetaIndex: 5, Append: &fsm.Append{Topic: "orders", Batches: []fsm.PartitionBatch{
			{Partition: 0, Batch: []byte("batch bytes"), Keys: []fsm.RecordKey{{Index: 0, Key: "a", Digest: digest}, {Index: 4, Key: "", Digest: dedup.Digest{}}}},
			{Partition: 9, Batch: []byte{}},
			{Partition: 2, Batch: nil, Keys: []fsm.RecordKey{}},
		}}}},
		{name: "an append without batches", call: groupCall{Kind: callAppend, Append: &fsm.Append{Topic: "orders"}}},
	}
}

// sampleAnswers are answers to produce and append calls.
func sampleAnswers() []struct {
	name string
	ans  groupAnswer
} {
	return []struct {
		name string
		ans  groupAnswer
	}{
		{name: "a produce's results", ans: groupAnswer{Applied: 1234, Produce: &backend.ProduceResult{
			Results:  []backend.RecordResult{{Partition: 3, Offset: 1 << 33}, {Partition: 3, Offset: 1<<33 + 1}, {Partition: 7, Offset: 0}, {Partition: 3, Offset: 5, Duplicate: true}, {Offset: math.MaxInt64}, {Offset: -1}, {Offset: math.MinInt64}},
			Appended: 3, Bytes: 4096, Duplicates: 1, CommitTime: 3 * time.Millisecond, Incarnation: 99, ProducerChecked: true,
		}}},
		{name: "a produce with no results", ans: groupAnswer{Produce: &backend.ProduceResult{Results: []backend.RecordResult{}}}},
		{name: "a produce with nil results", ans: groupAnswer{Produce: &backend.ProduceResult{}}},
		{name: "not the leader, with a hint", ans: groupAnswer{Err: encodeWireError(fmt.Errorf("%w: data group 3", backend.ErrNotLeader)), Leader: "n2"}},
		{name: "a typed error", ans: groupAnswer{Err: encodeWireError(&backend.OverloadedError{Topic: "t", Group: "g", Bound: "records", Backlog: 10, Adding: 5, Limit: 12})}},
		{name: "an append's bases", ans: groupAnswer{Applied: 7, Bases: []int64{0, 100, -1}}},
		{name: "a partial append", ans: groupAnswer{Bases: []int64{10, -1, 30}, BatchErrs: []*wireError{nil, encodeWireError(backend.ErrOutOfOrderSequence), nil}}},
		{name: "empty bases and errors", ans: groupAnswer{Bases: []int64{}, BatchErrs: []*wireError{}}},
		{name: "a read and a result, kept whole", ans: groupAnswer{Read: &readAnswer{Batches: []byte("xyz"), LogStart: 1, End: 9, Offset: 4}, Result: json.RawMessage(`{"a":1}`)}},
		{name: "nothing", ans: groupAnswer{}},
	}
}

// viaJSON is v sent in JSON: what a node decodes from a JSON call or
// answer.
func viaJSON[T any](t *testing.T, v T) T {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBinaryCallRoundTrip: a produce or append call and its answer in
// the binary form decode to what their JSON decodes to, field by field
// (partitions and their flags, keys, headers, nil and empty values,
// timestamps, idempotency keys, producer sequences; results, errors,
// leader hints, Applied, an append's partial errors); and the calls the
// form does not carry stay JSON.
func TestBinaryCallRoundTrip(t *testing.T) {
	for _, tc := range sampleCalls() {
		t.Run("call/"+tc.name, func(t *testing.T) {
			req, err := encodeCall(tc.call, true)
			if err != nil || !isBinary(req) {
				t.Fatalf("encoded %v, %v; want the binary form", req[:min(len(req), 8)], err)
			}
			got, err := decodeCall(req)
			if err != nil {
				t.Fatal(err)
			}
			if want := viaJSON(t, tc.call); !reflect.DeepEqual(got, want) {
				t.Errorf("decoded\n%+v\nwant (as JSON)\n%+v", got, want)
			}
			js, err := encodeCall(tc.call, false)
			if err != nil || isBinary(js) {
				t.Fatalf("JSON form %q, %v", js, err)
			}
			if fromJSON, err := decodeCall(js); err != nil || !reflect.DeepEqual(fromJSON, got) {
				t.Errorf("its JSON form decodes to %+v, %v", fromJSON, err)
			}
		})
	}
	for _, tc := range sampleAnswers() {
		t.Run("answer/"+tc.name, func(t *testing.T) {
			out, err := encodeAnswer(tc.ans, true)
			if err != nil || !isBinary(out) {
				t.Fatalf("encoded %v, %v; want the binary form", out[:min(len(out), 8)], err)
			}
			got, err := decodeAnswer(out)
			if err != nil {
				t.Fatal(err)
			}
			if want := viaJSON(t, tc.ans); !reflect.DeepEqual(got, want) {
				t.Errorf("decoded\n%+v\nwant (as JSON)\n%+v", got, want)
			}
			if got.Err != nil && got.Err.decode().Error() != tc.ans.Err.decode().Error() {
				t.Errorf("error %q, want %q", got.Err.decode(), tc.ans.Err.decode())
			}
		})
	}
	// Calls the form does not carry go in JSON whatever the level.
	for _, call := range []groupCall{
		{Kind: callRead, Read: &readCall{Topic: "t"}},
		{Kind: callProduce},
		{Kind: callAppend},
		{Kind: callConverge, Converge: &fsm.DataGroup{ID: 1}},
	} {
		if b, err := encodeCall(call, true); err != nil || isBinary(b) {
			t.Errorf("%s call encoded as %q, %v; want JSON", call.Kind, b, err)
		}
	}
}

// TestBinaryCallMalformed: a call or an answer in the binary form that
// is cut anywhere, or carries what no build writes, is a
// *callFormatError (a backend.ErrInvalidArgument) naming the field,
// never a panic and never a call half read.
func TestBinaryCallMalformed(t *testing.T) {
	var msgs [][]byte
	for _, tc := range sampleCalls() {
		b, _ := encodeCall(tc.call, true)
		msgs = append(msgs, b)
	}
	for _, b := range msgs {
		for n := range len(b) {
			if _, err := readBinaryCall(b[:n]); !isFormatError(err) {
				t.Fatalf("call %x cut at %d: %v, want a format error", b, n, err)
			}
		}
		if _, err := readBinaryCall(append(b[:len(b):len(b)], 0)); !formatErrorAt(err, "end") {
			t.Errorf("call with a byte after it: %v", err)
		}
	}
	for _, tc := range sampleAnswers() {
		b, _ := encodeAnswer(tc.ans, true)
		for n := range len(b) {
			if _, err := readBinaryAnswer(b[:n]); !isFormatError(err) {
				t.Fatalf("answer %x cut at %d: %v, want a format error", b, n, err)
			}
		}
	}

	head := []byte{binaryForm, binaryVersion, binaryProduce, 0, 0}
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	huge := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f} // a uvarint of 2^63-1
	for _, tc := range []struct {
		name, what string
		msg        []byte
	}{
		{name: "empty", what: "form", msg: nil},
		{name: "JSON's first byte", what: "form", msg: []byte("{}")},
		{name: "a later version", what: "version", msg: []byte{binaryForm, 2, binaryProduce, 0, 0}},
		{name: "an unknown kind", what: "kind", msg: []byte{binaryForm, binaryVersion, 9, 0, 0}},
		{name: "an overlong varint", what: "meta index", msg: cat([]byte{binaryForm, binaryVersion, binaryProduce}, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})},
		{name: "a topic longer than the message", what: "topic", msg: cat(head, []byte{50, 'a'})},
		{name: "a topic of 2^63 bytes", what: "topic", msg: cat(head, huge)},
		{name: "a producer flag of 2", what: "producer", msg: cat(head, []byte{1, 't', 2})},
		{name: "more records than bytes", what: "records", msg: cat(head, []byte{0, 0}, huge)},
		{name: "a million records in a few bytes", what: "records", msg: cat(head, []byte{0, 0, 0xc1, 0x84, 0x3d}, make([]byte, 20))},
		{name: "unknown record flags", what: "record flags", msg: cat(head, []byte{0, 0, 2, 0x80, 0, 0, 0, 0, 0, 0, 0})},
		{name: "a partition beyond int32", what: "partition", msg: cat(head, []byte{0, 0, 2, 1, 0xfe, 0xff, 0xff, 0xff, 0x1f, 0, 0, 0, 0, 0})},
		{name: "a value longer than the message", what: "value", msg: cat(head, []byte{0, 0, 2, 0, 0, 0, 0, 200, 1, 0, 0})},
		{name: "headers beyond the message", what: "headers", msg: cat(head, []byte{0, 0, 2, 0, 0, 0, 0, 0, 100, 0})},
		{name: "a producer's partition twice", what: "sequence's partition", msg: cat(head, []byte{0, 1, 2, 0, 3, 2, 0, 2, 4}, []byte{1})},
		{name: "an epoch beyond int16", what: "producer epoch", msg: cat(head, []byte{0, 1, 2, 0x80, 0x80, 0x04, 1, 1})},
		{name: "a key's digest cut", what: "digest", msg: []byte{binaryForm, binaryVersion, binaryAppend, 0, 0, 1, 't', 2, 0, 0, 2, 0, 2, 'a', 'b', 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readBinaryCall(tc.msg)
			var fe *callFormatError
			if !errors.As(err, &fe) || !errors.Is(err, backend.ErrInvalidArgument) || fe.What != tc.what {
				t.Fatalf("%v, want a format error at %q", err, tc.what)
			}
		})
	}
	for _, tc := range []struct {
		name, what string
		msg        []byte
	}{
		{name: "an error that is not JSON", what: "error", msg: []byte{binaryForm, binaryVersion, 0, 0, 3, '{', '!', 0, 0, 0, 0}},
		{name: "a duplicate flag of 5", what: "duplicate", msg: []byte{binaryForm, binaryVersion, 0, 0, 0, 1, 2, 0, 0, 5}},
		{name: "more bases than bytes", what: "bases", msg: []byte{binaryForm, binaryVersion, 0, 0, 0, 0, 100, 1}},
	} {
		t.Run("answer/"+tc.name, func(t *testing.T) {
			_, err := readBinaryAnswer(tc.msg)
			var fe *callFormatError
			if !errors.As(err, &fe) || fe.What != tc.what {
				t.Fatalf("%v, want a format error at %q", err, tc.what)
			}
		})
	}
}

func isFormatError(err error) bool {
	var fe *callFormatError
	return errors.As(err, &fe) && errors.Is(err, backend.ErrInvalidArgument)
}

func formatErrorAt(err error, what string) bool {
	var fe *callFormatError
	return errors.As(err, &fe) && fe.What == what
}

// FuzzReadBinaryCall: any bytes decode to a call or a format error,
// never a panic; a call decoded re-encodes to the same call.
func FuzzReadBinaryCall(f *testing.F) {
	for _, tc := range sampleCalls() {
		b, _ := encodeCall(tc.call, true)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		call, err := readBinaryCall(msg)
		if err != nil {
			if !isFormatError(err) {
				t.Fatalf("error %v is not a format error", err)
			}
			return
		}
		again, err := readBinaryCall(appendBinaryCall(nil, call))
		if err != nil || !reflect.DeepEqual(again, call) {
			t.Fatalf("decoded %+v, re-encoded decodes to %+v, %v", call, again, err)
		}
	})
}

// FuzzReadBinaryAnswer: any bytes decode to an answer or a format error,
// never a panic.
func FuzzReadBinaryAnswer(f *testing.F) {
	for _, tc := range sampleAnswers() {
		b, _ := encodeAnswer(tc.ans, true)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		ans, err := readBinaryAnswer(msg)
		if err != nil {
			if !isFormatError(err) {
				t.Fatalf("error %v is not a format error", err)
			}
			return
		}
		if _, err := encodeAnswer(ans, true); err != nil {
			t.Fatalf("decoded %+v, which does not encode: %v", ans, err)
		}
	})
}

// benchCall is a produce call as a node forwards one of the benchmark's
// (make bench-system's first row): 5000 keyless records of 128 bytes,
// each with its partition, and its answer.
func benchCall() (groupCall, groupAnswer) {
	req := &backend.ProduceRequest{Topic: "bench", Records: make([]backend.ProduceRecord, 5000)}
	res := &backend.ProduceResult{Results: make([]backend.RecordResult, 5000), Appended: 5000, Bytes: 5000 * 150, CommitTime: 4 * time.Millisecond, Incarnation: 12}
	for i := range req.Records {
		v := make([]byte, 128)
		for j := range v {
			v[j] = byte(i + j)
		}
		p := int32(2 + i%2)
		req.Records[i] = backend.ProduceRecord{Partition: p, HasPartition: true, Value: v}
		res.Results[i] = backend.RecordResult{Partition: p, Offset: 1_000_000 + int64(i/2)}
	}
	return groupCall{Kind: callProduce, MetaIndex: 40_000, Produce: req}, groupAnswer{Applied: 123_456, Produce: res}
}

// BenchmarkGroupCallCodec: a 5000-record produce call and its answer,
// encoded by the calling node and decoded by the answering one (and the
// answer the other way), in JSON and in the binary form.
func BenchmarkGroupCallCodec(b *testing.B) {
	call, ans := benchCall()
	for _, form := range []struct {
		name string
		bin  bool
	}{{"json", false}, {"binary", true}} {
		b.Run("call/"+form.name, func(b *testing.B) {
			b.ReportAllocs()
			var size int
			for b.Loop() {
				req, err := encodeCall(call, form.bin)
				if err != nil {
					b.Fatal(err)
				}
				size = len(req)
				if _, err := decodeCall(req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(size), "bytes/msg")
		})
		b.Run("answer/"+form.name, func(b *testing.B) {
			b.ReportAllocs()
			var size int
			for b.Loop() {
				out, err := encodeAnswer(ans, form.bin)
				if err != nil {
					b.Fatal(err)
				}
				size = len(out)
				if _, err := decodeAnswer(out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(size), "bytes/msg")
		})
	}
}

// TestProduceCallForms: a produce that another node's group leader
// answers goes there in the binary form once every member registered
// fsm.BinaryCallsLevel, and in JSON, exactly as before, while a member
// runs a build below it; the records land as sent either way. A node of
// this build answers a JSON call at the level too (a node of the
// previous build calls it so during a rolling upgrade), and a node that
// refuses the binary form (one restarted with an earlier build after it
// registered the level) is called again in JSON.
func TestProduceCallForms(t *testing.T) {
	for _, tc := range []struct {
		name   string
		level  fsm.FeatureLevel
		binary bool
	}{
		{name: "below the level", level: fsm.BinaryCallsLevel - 1, binary: false},
		{name: "at the level", level: fsm.BinaryCallsLevel, binary: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_, nodes, describe := dataGroupCluster(ctx, t, func(cfg *Config) {
				cfg.DataGroupsPerNode, cfg.ReplicationFactor = 1, 2
				cfg.FeatureLevel = backend.FeatureLevel(tc.level)
			})
			waitGroupsOfTwo(ctx, t, nodes, describe)
			l := nodes[0]
			waitFor(ctx, t, "every node registers its level, and another node leads a group", func() bool {
				for _, n := range nodes {
					if l.FSM().NodeFeatureLevel(n.NodeID()) != tc.level {
						return false
					}
				}
				_, leaders := dataGroupsView(nodes)
				for _, id := range leaders {
					if id != l.NodeID() {
						return true
					}
				}
				return false
			}, describe)
			if got := l.binaryCalls(); got != tc.binary {
				t.Fatalf("binary calls %v at level %d", got, tc.level)
			}

			// Every node notes the form of each produce call it answers.
			var mu sync.Mutex
			var forms []bool
			var refuseBinary atomic.Bool
			for _, n := range nodes {
				n.stores.port.HandleCalls(func(ctx context.Context, peer string, g uint64, req []byte) ([]byte, error) {
					if call, err := decodeCall(req); err == nil && call.Kind == callProduce {
						mu.Lock()
						forms = append(forms, isBinary(req))
						mu.Unlock()
						if isBinary(req) && refuseBinary.Load() {
							return nil, fmt.Errorf("%w: call: invalid character '\\xb1' looking for beginning of value", backend.ErrInvalidArgument)
						}
					}
					return n.answerCall(ctx, peer, g, req)
				})
			}
			taken := func() (bin, js int) {
				mu.Lock()
				defer mu.Unlock()
				for _, f := range forms {
					if f {
						bin++
					} else {
						js++
					}
				}
				forms = nil
				return bin, js
			}

			b := NewBackend(l)
			if _, err := b.CreateTopic(ctx, backend.CreateTopic{Name: "forms", Partitions: 6}); err != nil {
				t.Fatal(err)
			}
			var recs []backend.ProduceRecord
			for p := range int32(6) {
				recs = append(recs,
					backend.ProduceRecord{Partition: p, HasPartition: true, Key: []byte("k"), Value: []byte("v"), TimestampMs: 1733570000000 + int64(p),
						Headers: []batch.Header{{Key: "h", Value: []byte("x")}, {Key: "null", Value: nil}}},
					backend.ProduceRecord{Partition: p, HasPartition: true, Key: []byte{}, Value: nil},
					backend.ProduceRecord{Partition: p, HasPartition: true, Value: []byte{}, IdempotencyKey: fmt.Sprintf("id-%d", p)},
				)
			}
			// Twice: the second call's keyed records are duplicates.
			for round := range 2 {
				res, err := b.Produce(ctx, backend.ProduceRequest{Topic: "forms", Records: recs})
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				if len(res.Results) != len(recs) || res.Appended+res.Duplicates != len(recs) || round == 1 && res.Duplicates != 6 {
					t.Fatalf("round %d: %+v", round, res)
				}
				for i, r := range res.Results {
					want := recs[i]
					if r.Partition != want.Partition || r.Duplicate != (round == 1 && want.IdempotencyKey != "") {
						t.Errorf("round %d, record %d: %+v", round, i, r)
					}
					if r.Duplicate {
						continue
					}
					got, err := b.ReadLeader(ctx, "forms", r.Partition, r.Offset, 1<<20)
					if err != nil {
						t.Fatal(err)
					}
					bs, err := batch.DecodeAll(got.Batches)
					if err != nil {
						t.Fatal(err)
					}
					var d *batch.Record
					for _, bt := range bs {
						for j := range bt.Records {
							if bt.Records[j].Offset == r.Offset {
								d = &bt.Records[j]
							}
						}
					}
					switch {
					case d == nil:
						t.Errorf("record %d not at %d@%d", i, r.Partition, r.Offset)
					case (d.Key == nil) != (want.Key == nil) || string(d.Key) != string(want.Key) ||
						(d.Value == nil) != (want.Value == nil) || string(d.Value) != string(want.Value) ||
						want.TimestampMs != 0 && d.Timestamp != want.TimestampMs || len(d.Headers) != len(want.Headers):
						t.Errorf("record %d read back as %+v, sent %+v", i, d, want)
					}
				}
			}
			bin, js := taken()
			if tc.binary && (bin == 0 || js != 0) || !tc.binary && (js == 0 || bin != 0) {
				t.Fatalf("produce calls: %d binary, %d JSON; want them all binary: %v", bin, js, tc.binary)
			}
			if !tc.binary {
				return
			}

			// A JSON call is answered at the level.
			var g uint64
			var leader string
			mt, _ := l.FSM().Topic("forms")
			_, leaders := dataGroupsView(nodes)
			p := int32(-1)
			for q, pg := range mt.Placement {
				if id := leaders[pg]; id != "" && id != l.NodeID() {
					g, leader, p = pg, id, int32(q)
				}
			}
			if p < 0 {
				t.Fatalf("no partition led elsewhere: %v over %v", mt.Placement, leaders)
			}
			ans, err := l.callGroup(ctx, leader, g, groupCall{Kind: callProduce, jsonOnly: true, Produce: &backend.ProduceRequest{Topic: "forms",
				Records: []backend.ProduceRecord{{Partition: p, HasPartition: true, Value: []byte("json")}}}})
			if err != nil || ans.Err != nil || ans.Produce == nil || len(ans.Produce.Results) != 1 || ans.Produce.Results[0].Partition != p || ans.Applied == 0 {
				t.Fatalf("a JSON call to %s: %+v, %v", leader, ans, err)
			}
			if bin, js := taken(); bin != 0 || js != 1 {
				t.Fatalf("the JSON call arrived as %d binary, %d JSON", bin, js)
			}

			// A node that refuses the binary form is called in JSON.
			refuseBinary.Store(true)
			if _, err := b.Produce(ctx, backend.ProduceRequest{Topic: "forms", Records: recs}); err != nil {
				t.Fatal(err)
			}
			if bin, js := taken(); bin == 0 || js < bin {
				t.Fatalf("with the binary form refused: %d binary, %d JSON calls; want each refused call again in JSON", bin, js)
			}
		})
	}
}
