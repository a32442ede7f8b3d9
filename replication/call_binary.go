package replication

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/dedup"
	"github.com/logd-dev/logd/replication/fsm"
)

// The binary form of calls between nodes (docs/architecture.md, "Data
// groups"). A produce or an append that another node's group leader
// answers carries every record, and its answer a result per record; in
// JSON each record is an object with its value in base64, and decoding
// those objects cost more CPU than the produce itself
// (docs/performance.md, "Data groups by default"). Once every member
// understands it (fsm.BinaryCallsLevel), a node sends those two kinds in
// the form below; every other kind, and every call below the level, is
// JSON as before. A node of this build reads both forms, tells them
// apart by the first byte (JSON's is '{'), and answers in the form it
// was called in, so a caller always reads its answer.
//
// Integers are encoding/binary varints (signed ones zigzag), strings a
// uvarint length and their bytes, byte slices a uvarint of their length
// plus one with 0 for nil (a nil key or value is not an empty one),
// lists their count plus one with 0 for nil (as JSON's null and [] are
// told apart).
//
//	call     = binaryForm version kind(1) meta_index(uvarint) min_applied(uvarint) body
//	produce  = topic(string) producer(byte 0 | 1 id(varint) epoch(varint) sequences) count+1(uvarint) record*
//	sequences= count+1(uvarint) (partition(varint) sequence(varint))*, by partition
//	record   = flags(1: bit 0 has partition) partition(varint) timestamp_ms(varint)
//	           key(bytes) value(bytes) headers(count+1, (key(string) value(bytes))*) idempotency_key(string)
//	append   = topic(string) count+1(uvarint) (partition(varint) batch(bytes) keys)*
//	keys     = count+1(uvarint) (index(varint) key(string) digest(16 bytes))*
//
//	answer   = binaryForm version applied(uvarint) leader(string) err(bytes: JSON of the wire error)
//	           produce(byte 0 | 1 result) bases(count+1, varint*) batch_errs(count+1, bytes*)
//	           rest(bytes: JSON of the answer's other fields, nil when none)
//	result   = count+1(uvarint) (partition(varint) offset_delta(varint) duplicate(byte))*
//	           appended bytes duplicates(varint) commit_time(varint) incarnation(uvarint) producer_checked(byte)
//
// A result's offset is the difference from the previous result's (the
// first from 0): a call's records mostly follow each other in few
// partitions, so most take a byte.

// binaryForm is the first byte of a call or answer in the binary form:
// JSON's first byte is '{'.
const binaryForm byte = 0xB1

// binaryVersion is the binary form's layout; a reader refuses another.
const binaryVersion byte = 1

// The kinds of call the binary form carries, by their byte.
const (
	binaryProduce byte = 1
	binaryAppend  byte = 2
)

// digestSize is a dedup.Digest's size on the wire.
const digestSize = len(dedup.Digest{})

// callFormatError is a call or an answer in the binary form that does
// not decode: what was being read, where, and why. It wraps
// backend.ErrInvalidArgument: the sender wrote what no build writes.
type callFormatError struct {
	What   string
	Offset int
	Reason string
}

func (e *callFormatError) Error() string {
	return fmt.Sprintf("binary call: %s at byte %d: %s", e.What, e.Offset, e.Reason)
}

// Unwrap makes the error a backend.ErrInvalidArgument.
func (e *callFormatError) Unwrap() error { return backend.ErrInvalidArgument }

// isBinary reports whether msg, a call or an answer, is in the binary
// form.
func isBinary(msg []byte) bool { return len(msg) > 0 && msg[0] == binaryForm }

// binaryCall reports whether call has a binary form.
func binaryCall(call groupCall) bool {
	return call.Kind == callProduce && call.Produce != nil || call.Kind == callAppend && call.Append != nil
}

// encodeCall encodes call in the binary form when bin and the form
// carries its kind, else in JSON.
func encodeCall(call groupCall, bin bool) ([]byte, error) {
	if !bin || !binaryCall(call) {
		return json.Marshal(call)
	}
	return appendBinaryCall(nil, call), nil
}

// decodeCall decodes a call in either form.
func decodeCall(req []byte) (groupCall, error) {
	var call groupCall
	if isBinary(req) {
		return readBinaryCall(req)
	}
	err := json.Unmarshal(req, &call)
	return call, err
}

// encodeAnswer encodes ans in the form of the call it answers.
func encodeAnswer(ans groupAnswer, bin bool) ([]byte, error) {
	if !bin {
		return json.Marshal(ans)
	}
	return appendBinaryAnswer(nil, ans)
}

// decodeAnswer decodes an answer in either form.
func decodeAnswer(out []byte) (groupAnswer, error) {
	var ans groupAnswer
	if isBinary(out) {
		return readBinaryAnswer(out)
	}
	err := json.Unmarshal(out, &ans)
	return ans, err
}

// appendBinaryCall appends call (binaryCall's) in the binary form to dst.
func appendBinaryCall(dst []byte, call groupCall) []byte {
	if dst == nil {
		dst = make([]byte, 0, binaryCallSize(call))
	}
	dst = append(dst, binaryForm, binaryVersion)
	switch call.Kind {
	case callProduce:
		dst = append(dst, binaryProduce)
	default:
		dst = append(dst, binaryAppend)
	}
	dst = binary.AppendUvarint(dst, call.MetaIndex)
	dst = binary.AppendUvarint(dst, call.MinApplied)
	if call.Kind == callProduce {
		return appendProduce(dst, call.Produce)
	}
	return appendAppend(dst, call.Append)
}

// binaryCallSize is about the size of call's binary form, so that it is
// written into one allocation.
func binaryCallSize(call groupCall) int {
	n := 32
	if call.Produce != nil {
		n += len(call.Produce.Topic)
		if pr := call.Produce.Producer; pr != nil {
			n += 16 * len(pr.BaseSequences)
		}
		for i := range call.Produce.Records {
			r := &call.Produce.Records[i]
			n += 24 + len(r.Key) + len(r.Value) + len(r.IdempotencyKey)
			for _, h := range r.Headers {
				n += 4 + len(h.Key) + len(h.Value)
			}
		}
	}
	if call.Append != nil {
		n += len(call.Append.Topic)
		for _, b := range call.Append.Batches {
			n += 16 + len(b.Batch)
			for _, k := range b.Keys {
				n += 8 + len(k.Key) + digestSize
			}
		}
	}
	return n
}

func appendProduce(dst []byte, req *backend.ProduceRequest) []byte {
	dst = appendString(dst, req.Topic)
	if pr := req.Producer; pr == nil {
		dst = append(dst, 0)
	} else {
		dst = append(dst, 1)
		dst = binary.AppendVarint(dst, pr.ID)
		dst = binary.AppendVarint(dst, int64(pr.Epoch))
		dst = appendCount(dst, len(pr.BaseSequences), pr.BaseSequences == nil)
		parts := make([]int32, 0, len(pr.BaseSequences))
		for p := range pr.BaseSequences {
			parts = append(parts, p)
		}
		slices.Sort(parts)
		for _, p := range parts {
			dst = binary.AppendVarint(dst, int64(p))
			dst = binary.AppendVarint(dst, int64(pr.BaseSequences[p]))
		}
	}
	dst = appendCount(dst, len(req.Records), req.Records == nil)
	for i := range req.Records {
		r := &req.Records[i]
		var flags byte
		if r.HasPartition {
			flags |= 1
		}
		dst = append(dst, flags)
		dst = binary.AppendVarint(dst, int64(r.Partition))
		dst = binary.AppendVarint(dst, r.TimestampMs)
		dst = appendBytes(dst, r.Key)
		dst = appendBytes(dst, r.Value)
		dst = appendCount(dst, len(r.Headers), r.Headers == nil)
		for _, h := range r.Headers {
			dst = appendString(dst, h.Key)
			dst = appendBytes(dst, h.Value)
		}
		dst = appendString(dst, r.IdempotencyKey)
	}
	return dst
}

func appendAppend(dst []byte, a *fsm.Append) []byte {
	dst = appendString(dst, a.Topic)
	dst = appendCount(dst, len(a.Batches), a.Batches == nil)
	for _, b := range a.Batches {
		dst = binary.AppendVarint(dst, int64(b.Partition))
		dst = appendBytes(dst, b.Batch)
		dst = appendCount(dst, len(b.Keys), b.Keys == nil)
		for _, k := range b.Keys {
			dst = binary.AppendVarint(dst, int64(k.Index))
			dst = appendString(dst, k.Key)
			dst = append(dst, k.Digest[:]...)
		}
	}
	return dst
}

// appendBinaryAnswer appends ans in the binary form to dst.
func appendBinaryAnswer(dst []byte, ans groupAnswer) ([]byte, error) {
	var errJSON, rest []byte
	var e error
	if ans.Err != nil {
		if errJSON, e = json.Marshal(ans.Err); e != nil {
			return nil, e
		}
	}
	if ans.Read != nil || ans.Result != nil {
		// Kinds the binary form does not carry answer these; kept whole.
		if rest, e = json.Marshal(groupAnswer{Read: ans.Read, Result: ans.Result}); e != nil {
			return nil, e
		}
	}
	batchErrs := make([][]byte, len(ans.BatchErrs))
	for i, w := range ans.BatchErrs {
		if w != nil {
			if batchErrs[i], e = json.Marshal(w); e != nil {
				return nil, e
			}
		}
	}
	if dst == nil {
		n := 32 + len(ans.Leader) + len(errJSON) + len(rest) + 10*len(ans.Bases)
		if ans.Produce != nil {
			n += 48 + 4*len(ans.Produce.Results)
		}
		for _, b := range batchErrs {
			n += 2 + len(b)
		}
		dst = make([]byte, 0, n)
	}
	dst = append(dst, binaryForm, binaryVersion)
	dst = binary.AppendUvarint(dst, ans.Applied)
	dst = appendString(dst, ans.Leader)
	dst = appendBytes(dst, errJSON)
	if res := ans.Produce; res == nil {
		dst = append(dst, 0)
	} else {
		dst = append(dst, 1)
		dst = appendCount(dst, len(res.Results), res.Results == nil)
		var prev int64
		for _, r := range res.Results {
			dst = binary.AppendVarint(dst, int64(r.Partition))
			dst = binary.AppendVarint(dst, r.Offset-prev)
			prev = r.Offset
			dst = appendBool(dst, r.Duplicate)
		}
		dst = binary.AppendVarint(dst, int64(res.Appended))
		dst = binary.AppendVarint(dst, int64(res.Bytes))
		dst = binary.AppendVarint(dst, int64(res.Duplicates))
		dst = binary.AppendVarint(dst, int64(res.CommitTime))
		dst = binary.AppendUvarint(dst, res.Incarnation)
		dst = appendBool(dst, res.ProducerChecked)
	}
	// Empty as nil, as JSON's omitempty sends them.
	dst = appendCount(dst, len(ans.Bases), len(ans.Bases) == 0)
	for _, b := range ans.Bases {
		dst = binary.AppendVarint(dst, b)
	}
	dst = appendCount(dst, len(ans.BatchErrs), len(ans.BatchErrs) == 0)
	for _, b := range batchErrs {
		dst = appendBytes(dst, b)
	}
	return appendBytes(dst, rest), nil
}

func appendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// appendBytes appends b as a length plus one, 0 for nil.
func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return append(dst, 0)
	}
	return append(binary.AppendUvarint(dst, uint64(len(b))+1), b...)
}

// appendCount appends a list's count plus one, 0 for a nil list.
func appendCount(dst []byte, n int, isNil bool) []byte {
	if isNil {
		return append(dst, 0)
	}
	return binary.AppendUvarint(dst, uint64(n)+1)
}

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// wireReader reads the binary form. Its first error sticks: every read
// after it returns a zero value, and err says what failed first. Slices
// it returns share the message's bytes (the transport gives each call
// and answer buffers of their own, and the produce path keeps no
// reference to a request's records past the call, backend.ProduceRecord).
type wireReader struct {
	b   []byte
	off int
	err error
}

func (r *wireReader) fail(what, reason string) {
	if r.err == nil {
		r.err = &callFormatError{What: what, Offset: r.off, Reason: reason}
	}
}

func (r *wireReader) u8(what string) byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail(what, "the message ends")
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *wireReader) flag(what string) bool {
	switch c := r.u8(what); c {
	case 0:
		return false
	case 1:
		return true
	default:
		r.off--
		r.fail(what, fmt.Sprintf("a flag of %d", c))
		return false
	}
}

func (r *wireReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail(what, "a truncated or overlong varint")
		return 0
	}
	r.off += n
	return v
}

func (r *wireReader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		r.fail(what, "a truncated or overlong varint")
		return 0
	}
	r.off += n
	return v
}

// ranged reads a varint within [lo, hi].
func (r *wireReader) ranged(what string, lo, hi int64) int64 {
	at := r.off
	v := r.varint(what)
	if r.err == nil && (v < lo || v > hi) {
		r.off = at
		r.fail(what, fmt.Sprintf("%d is out of range", v))
		return 0
	}
	return v
}

func (r *wireReader) i32(what string) int32 {
	return int32(r.ranged(what, math.MinInt32, math.MaxInt32))
}

// take returns the next n bytes.
func (r *wireReader) take(what string, n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)-r.off) {
		r.fail(what, fmt.Sprintf("%d bytes, %d left", n, len(r.b)-r.off))
		return nil
	}
	b := r.b[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return b
}

func (r *wireReader) str(what string) string {
	return string(r.take(what, r.uvarint(what)))
}

// nbytes reads appendBytes's: nil for 0, else a slice of the message.
func (r *wireReader) nbytes(what string) []byte {
	n := r.uvarint(what)
	if r.err != nil || n == 0 {
		return nil
	}
	return r.take(what, n-1)
}

// count reads appendCount's for a list whose elements take at least
// least bytes each, so that a count the rest of the message cannot hold
// is refused before anything is allocated for it. isNil reports a nil
// list.
func (r *wireReader) count(what string, least int) (n int, isNil bool) {
	at := r.off
	v := r.uvarint(what)
	if r.err != nil {
		return 0, false
	}
	if v == 0 {
		return 0, true
	}
	v--
	if left := len(r.b) - r.off; v > uint64(left/least) {
		r.off = at
		r.fail(what, fmt.Sprintf("%d of them in %d bytes", v, left))
		return 0, false
	}
	return int(v), false
}

// header reads the binary form's first two bytes.
func (r *wireReader) header() {
	if f := r.u8("form"); r.err == nil && f != binaryForm {
		r.off--
		r.fail("form", fmt.Sprintf("first byte %#x", f))
	}
	if v := r.u8("version"); r.err == nil && v != binaryVersion {
		r.off--
		r.fail("version", fmt.Sprintf("version %d; this build reads %d", v, binaryVersion))
	}
}

// end checks that nothing follows what was read.
func (r *wireReader) end() error {
	if r.err == nil && r.off != len(r.b) {
		r.fail("end", fmt.Sprintf("%d bytes follow", len(r.b)-r.off))
	}
	return r.err
}

// readBinaryCall decodes a call in the binary form.
func readBinaryCall(msg []byte) (groupCall, error) {
	r := &wireReader{b: msg}
	r.header()
	var call groupCall
	kind := r.u8("kind")
	if r.err == nil && kind != binaryProduce && kind != binaryAppend {
		r.off--
		r.fail("kind", fmt.Sprintf("kind %d", kind))
	}
	call.MetaIndex = r.uvarint("meta index")
	call.MinApplied = r.uvarint("min applied")
	if r.err != nil {
		return groupCall{}, r.err
	}
	if kind == binaryProduce {
		call.Kind, call.Produce = callProduce, readProduce(r)
	} else {
		call.Kind, call.Append = callAppend, readAppend(r)
	}
	if err := r.end(); err != nil {
		return groupCall{}, err
	}
	return call, nil
}

// The fewest bytes a produce record, a header, a partition's sequence,
// an append's batch and a key take in the binary form.
const (
	minRecordBytes   = 7
	minHeaderBytes   = 2
	minSequenceBytes = 2
	minBatchBytes    = 3
	minKeyBytes      = 2 + digestSize
	minResultBytes   = 3
)

func readProduce(r *wireReader) *backend.ProduceRequest {
	req := &backend.ProduceRequest{Topic: r.str("topic")}
	if r.flag("producer") {
		pr := &backend.ProducerSequence{ID: r.varint("producer id"), Epoch: int16(r.ranged("producer epoch", math.MinInt16, math.MaxInt16))}
		n, isNil := r.count("producer sequences", minSequenceBytes)
		if !isNil {
			pr.BaseSequences = make(map[int32]int32, n)
		}
		for range n {
			at := r.off
			p := r.i32("sequence's partition")
			if _, dup := pr.BaseSequences[p]; dup && r.err == nil {
				r.off = at
				r.fail("sequence's partition", fmt.Sprintf("partition %d twice", p))
			}
			pr.BaseSequences[p] = r.i32("sequence")
		}
		req.Producer = pr
	}
	n, isNil := r.count("records", minRecordBytes)
	if r.err != nil {
		return nil
	}
	if !isNil {
		req.Records = make([]backend.ProduceRecord, n)
	}
	for i := range req.Records {
		rec := &req.Records[i]
		at := r.off
		flags := r.u8("record flags")
		if flags&^1 != 0 && r.err == nil {
			r.off = at
			r.fail("record flags", fmt.Sprintf("flags %#x", flags))
		}
		rec.HasPartition = flags&1 != 0
		rec.Partition = r.i32("partition")
		rec.TimestampMs = r.varint("timestamp")
		rec.Key = r.nbytes("key")
		rec.Value = r.nbytes("value")
		h, isNil := r.count("headers", minHeaderBytes)
		if !isNil && r.err == nil {
			rec.Headers = make([]batch.Header, h)
			for j := range rec.Headers {
				rec.Headers[j] = batch.Header{Key: r.str("header key"), Value: r.nbytes("header value")}
			}
		}
		rec.IdempotencyKey = r.str("idempotency key")
		if r.err != nil {
			return nil
		}
	}
	return req
}

func readAppend(r *wireReader) *fsm.Append {
	a := &fsm.Append{Topic: r.str("topic")}
	n, isNil := r.count("batches", minBatchBytes)
	if isNil || r.err != nil {
		return a
	}
	a.Batches = make([]fsm.PartitionBatch, n)
	for i := range a.Batches {
		b := &a.Batches[i]
		b.Partition = r.i32("batch's partition")
		b.Batch = r.nbytes("batch")
		k, isNil := r.count("keys", minKeyBytes)
		if !isNil && r.err == nil {
			b.Keys = make([]fsm.RecordKey, k)
			for j := range b.Keys {
				key := &b.Keys[j]
				key.Index = r.i32("key's index")
				key.Key = r.str("key")
				copy(key.Digest[:], r.take("digest", uint64(digestSize)))
			}
		}
		if r.err != nil {
			return nil
		}
	}
	return a
}

// readBinaryAnswer decodes an answer in the binary form.
func readBinaryAnswer(msg []byte) (groupAnswer, error) {
	r := &wireReader{b: msg}
	r.header()
	var ans groupAnswer
	ans.Applied = r.uvarint("applied")
	ans.Leader = r.str("leader")
	if b := r.nbytes("error"); b != nil {
		ans.Err = &wireError{}
		r.jsonPart("error", b, ans.Err)
	}
	if r.flag("produce result") {
		ans.Produce = readResult(r)
	}
	n, isNil := r.count("bases", 1)
	if !isNil && r.err == nil {
		ans.Bases = make([]int64, n)
		for i := range ans.Bases {
			ans.Bases[i] = r.varint("base")
		}
	}
	n, isNil = r.count("batch errors", 1)
	if !isNil && r.err == nil {
		ans.BatchErrs = make([]*wireError, n)
		for i := range ans.BatchErrs {
			if b := r.nbytes("batch error"); b != nil {
				ans.BatchErrs[i] = &wireError{}
				r.jsonPart("batch error", b, ans.BatchErrs[i])
			}
		}
	}
	if b := r.nbytes("rest"); b != nil {
		var rest groupAnswer
		r.jsonPart("rest", b, &rest)
		ans.Read, ans.Result = rest.Read, rest.Result
	}
	if err := r.end(); err != nil {
		return groupAnswer{}, err
	}
	return ans, nil
}

// json decodes b, a JSON part of the message read just before, into v.
func (r *wireReader) jsonPart(what string, b []byte, v any) {
	if r.err != nil {
		return
	}
	if err := json.Unmarshal(b, v); err != nil {
		r.off -= len(b)
		r.fail(what, err.Error())
	}
}

func readResult(r *wireReader) *backend.ProduceResult {
	n, isNil := r.count("results", minResultBytes)
	if r.err != nil {
		return nil
	}
	res := &backend.ProduceResult{}
	if !isNil {
		res.Results = make([]backend.RecordResult, n)
	}
	var prev int64
	for i := range res.Results {
		rr := &res.Results[i]
		rr.Partition = r.i32("result's partition")
		// Two's complement: the difference the writer wrapped around,
		// if any, wraps back.
		rr.Offset = prev + r.varint("result's offset")
		prev = rr.Offset
		rr.Duplicate = r.flag("duplicate")
	}
	res.Appended = int(r.ranged("appended", math.MinInt, math.MaxInt))
	res.Bytes = int(r.ranged("bytes", math.MinInt, math.MaxInt))
	res.Duplicates = int(r.ranged("duplicates", math.MinInt, math.MaxInt))
	res.CommitTime = time.Duration(r.varint("commit time"))
	res.Incarnation = r.uvarint("incarnation")
	res.ProducerChecked = r.flag("producer checked")
	if r.err != nil {
		return nil
	}
	return res
}
