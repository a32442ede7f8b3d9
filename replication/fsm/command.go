package fsm

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math"
	"unsafe"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/dedup"
	"github.com/logd-dev/logd/internal/varint"
)

// CreateTopic creates a topic with its partitions.
type CreateTopic struct {
	Name       string            `json:"name"`
	Partitions int32             `json:"partitions"`
	Config     map[string]string `json:"config,omitempty"`
	// Quota, set by the proposer from its configuration, is checked when
	// the command is applied, so every replica refuses the same creation
	// (payload version createTopicQuotaVersion; nil in version 1).
	Quota *TopicQuota `json:"quota,omitempty"`
	// Principal is who creates the topic ("User:alice"), set by the
	// proposer from the call's authenticated principal, never by a client;
	// the topic records it, and the per-principal quota counts by it
	// (payload version createTopicPrincipalVersion; empty before).
	Principal string `json:"principal,omitempty"`
	// Placement is the data group of each partition (len Partitions); a
	// state machine opens only those of its own group (placement.go). nil
	// puts every partition in the state machine's group, as before
	// DataGroupLevel (payload version createTopicPlacementVersion).
	Placement []uint64 `json:"placement,omitempty"`
	// PlacementEpoch is the placement's epoch (with a Placement only).
	PlacementEpoch uint64 `json:"placement_epoch,omitempty"`
}

// DeleteTopic deletes a topic and its data.
type DeleteTopic struct {
	Name string `json:"name"`
	// TopicIndex, when not 0, is the CreateIndex of the incarnation to
	// delete: a later incarnation of the name is left alone (a data
	// group's drop of a topic the meta group deleted; payload version
	// deleteTopicIndexVersion, at DataGroupLevel).
	TopicIndex uint64 `json:"topic_index,omitempty"`
}

// PartitionBatch is one record batch destined for one partition.
type PartitionBatch struct {
	Partition int32
	Batch     []byte
	// Keys are the idempotency keys of records in the batch, if any.
	Keys []RecordKey
}

// RecordKey is a record's idempotency key and payload digest; Index is the
// record's position in its batch.
type RecordKey struct {
	Index  int32
	Key    string
	Digest dedup.Digest
}

// Append payload versions with idempotency keys after each batch; appends
// without keys keep version 1. Version 2 (read only: older builds wrote
// it) lists each key whole with its record index. Version 3 front-codes
// each key against the batch's previous key (business keys share long
// prefixes: "order-2026-11-29-…") and stores the record index as a delta,
// which shrinks a key's share of the Raft entry (so of the log written and
// replicated); random keys such as UUIDs gain little.
//
// Version 4 (appendCodecsVersion, at CompressionLevel) is version 3's
// layout, written when a batch of the append is compressed with snappy,
// lz4 or zstd: a build before that level decided differently about such
// batches (see CompressionLevel), so it must stop on the entry rather than
// apply it, and the proposer sends one only once every member is at the
// level.
//
// Version 5 (appendProducerVersion, at ProducerLevel) is version 3's
// layout, written when a batch of the append carries a Kafka producer id:
// such batches are judged by their partition's producer state
// (producers.go), which a build below that level would not do.
const (
	appendKeysVersion     = 2
	appendKeysVersionV3   = 3
	appendCodecsVersion   = 4
	appendProducerVersion = 5
)

// Append appends record batches to partitions of one topic. Either every
// batch is appended or none is.
type Append struct {
	Topic   string
	Batches []PartitionBatch
	// producers is set on an Append decoded from payload version
	// appendProducerVersion: its batches with a producer id are judged by
	// their partitions' producer state. Set only by decoding, so replicas
	// of every build decide by the entry alone.
	producers bool
}

// envelope is the decoded form of any command: its type, the leader-stamped
// time (Unix nanoseconds) and the typed body.
type envelope struct {
	Type CommandType
	Time int64
	Body any
	// Level is the feature level a replica needs to apply the command.
	Level FeatureLevel
}

// header layout: type(1) version(1) time(8).
const cmdHeaderSize = 10

func encodeHeader(dst []byte, t CommandType, now int64) []byte {
	dst = append(dst, byte(t), commandVersion)
	return binary.BigEndian.AppendUint64(dst, uint64(now))
}

// encodeJSONCommand encodes a metadata command; these are rare and small, so
// JSON keeps them readable in a raft log dump.
func encodeJSONCommand(t CommandType, now int64, body any) ([]byte, error) {
	p, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", t, err)
	}
	return append(encodeHeader(make([]byte, 0, cmdHeaderSize+len(p)+entryChecksumSize), t, now), p...), nil
}

// encodeAppend encodes an Append command in a compact binary form: the
// batches are copied once, into the Raft entry.
func encodeAppend(now int64, a Append) []byte {
	n := cmdHeaderSize + binary.MaxVarintLen64*2 + len(a.Topic) + entryChecksumSize
	keyed := false
	for _, b := range a.Batches {
		n += binary.MaxVarintLen64*2 + len(b.Batch)
		for _, k := range b.Keys {
			// The index delta fits 5 bytes (it spans 33 bits); the shared
			// and suffix lengths are at most the key's length.
			keyed = true
			n += 5 + 2*varint.UvarintLen(uint64(len(k.Key))) + len(k.Key) + len(k.Digest)
		}
	}
	dst := encodeHeader(make([]byte, 0, n), CmdAppend, now)
	if keyed {
		dst[1] = appendKeysVersionV3
	}
	if newCodecs(a) {
		keyed = true // version 4 has version 3's layout
		dst[1] = appendCodecsVersion
	}
	if hasProducerBatch(a) {
		keyed = true // version 5 has version 3's layout
		dst[1] = appendProducerVersion
	}
	dst = binary.AppendUvarint(dst, uint64(len(a.Topic)))
	dst = append(dst, a.Topic...)
	dst = binary.AppendUvarint(dst, uint64(len(a.Batches)))
	for _, b := range a.Batches {
		dst = binary.AppendUvarint(dst, uint64(uint32(b.Partition)))
		dst = binary.AppendUvarint(dst, uint64(len(b.Batch)))
		dst = append(dst, b.Batch...)
		if keyed {
			dst = binary.AppendUvarint(dst, uint64(len(b.Keys)))
			prevIndex, prev := int64(-1), ""
			for _, k := range b.Keys {
				shared := commonPrefix(k.Key, prev)
				dst = binary.AppendVarint(dst, int64(k.Index)-prevIndex-1)
				dst = binary.AppendUvarint(dst, uint64(shared))
				dst = binary.AppendUvarint(dst, uint64(len(k.Key)-shared))
				dst = append(dst, k.Key[shared:]...)
				dst = append(dst, k.Digest[:]...)
				prevIndex, prev = int64(k.Index), k.Key
			}
		}
	}
	return dst
}

// keyScratch is memory an Append's idempotency keys are decoded into,
// reused from one command to the next: the state machine decodes every
// keyed record of every entry, so the key tables and the keys' bytes are
// not allocated afresh for each. What one decode returns, the key strings
// included, is valid until the next decode with the same scratch: the
// strings alias buf, which that decode overwrites. The state machine only
// hashes, compares and copies them (the window keeps its own bytes), and an
// error quotes a key, which copies it.
type keyScratch struct {
	keys []RecordKey
	ends []int
	buf  []byte
}

// take returns n zeroed RecordKeys from the scratch, and n ends. Earlier
// takes of the same decode stay valid: a full scratch is replaced, not
// grown in place.
func (s *keyScratch) take(n int) ([]RecordKey, []int) {
	if cap(s.keys)-len(s.keys) < n {
		s.keys = make([]RecordKey, 0, max(2*cap(s.keys), n))
	}
	if cap(s.ends) < n {
		s.ends = make([]int, n)
	}
	keys := s.keys[len(s.keys) : len(s.keys)+n]
	s.keys = s.keys[:len(s.keys)+n]
	clear(keys)
	return keys, s.ends[:n]
}

// Every entry this build proposes is sealed: entryChecksumFlag set in its
// version byte and a CRC-32C of everything before it appended (4 bytes,
// big-endian). raft-boltdb stores entries without a checksum, and bbolt
// checksums only its meta pages, so without the seal a bit flipped in one
// node's copy of an entry would be applied as a different command on that
// node alone: another topic name or time, a batch refused as invalid there
// and appended everywhere else, an offset commit with another offset. A
// sealed entry whose checksum does not match stops the node instead
// (backend.ErrEntryDamaged). Entries written by older builds carry no flag and are
// read as before; a build older than the seal stops on a sealed entry (an
// unknown version) rather than guess.
const (
	entryChecksumFlag = 0x80
	entryChecksumSize = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sealEntry marks an encoded command as checksummed and appends the
// checksum. It sets the flag in data's version byte in place; data itself
// keeps its length, so sealing it again (a proposal retried with the same
// buffer) gives the same entry.
func sealEntry(data []byte) []byte {
	data[1] |= entryChecksumFlag
	return binary.BigEndian.AppendUint32(data, crc32.Checksum(data, castagnoli))
}

// openEntry checks a sealed entry's checksum and returns the entry without
// it and the command's version; an unsealed entry is returned whole.
func openEntry(data []byte) ([]byte, byte, error) {
	v := data[1]
	if v&entryChecksumFlag == 0 {
		return data, v, nil
	}
	if len(data) < cmdHeaderSize+entryChecksumSize {
		return nil, 0, fmt.Errorf("%w: sealed entry of %d bytes", backend.ErrEntryDamaged, len(data))
	}
	body := data[:len(data)-entryChecksumSize]
	want := binary.BigEndian.Uint32(data[len(body):])
	if got := crc32.Checksum(body, castagnoli); got != want {
		return nil, 0, fmt.Errorf("%w: checksum %08x, entry says %08x", backend.ErrEntryDamaged, got, want)
	}
	return body, v &^ entryChecksumFlag, nil
}

// decodeCommandWith decodes a Raft entry's data, an Append's idempotency
// keys into scratch. Batches in an Append alias data.
func decodeCommandWith(data []byte, scratch *keyScratch) (envelope, error) {
	if len(data) < cmdHeaderSize {
		return envelope{}, fmt.Errorf("%w: %d bytes", backend.ErrBadCommand, len(data))
	}
	data, version, err := openEntry(data)
	if err != nil {
		return envelope{}, err
	}
	env := envelope{Type: CommandType(data[0]), Time: int64(binary.BigEndian.Uint64(data[2:10]))}
	c := commandOf(env.Type)
	if c == nil {
		return env, fmt.Errorf("%w: %s", backend.ErrUnknownCommand, env.Type)
	}
	level, ok := c.levelOf(version)
	if !ok {
		return env, fmt.Errorf("%w: %s version %d", backend.ErrUnknownCommand, env.Type, version)
	}
	env.Level = level
	if env.Body, err = c.decode(data[cmdHeaderSize:], version, scratch); err != nil {
		env.Body = nil
		return env, err
	}
	if h, ok := env.Body.(GroupHosted); ok {
		// Opened here, not by its row: the rows cannot name the table.
		if env.Body, err = openHosted(h, scratch); err != nil {
			env.Body = nil
			return env, err
		}
	}
	return env, nil
}

// decodeAppendPayload decodes an Append's payload, its keys into scratch;
// the keys of the last decode with scratch are done with.
func decodeAppendPayload(p []byte, version byte, scratch *keyScratch) (Append, error) {
	scratch.keys, scratch.buf = scratch.keys[:0], scratch.buf[:0]
	return decodeAppend(p, version, scratch)
}

func decodeAppend(p []byte, version byte, scratch *keyScratch) (Append, error) {
	var a Append
	r := reader{b: p, keys: scratch}
	topic := r.bytes()
	a.Topic = string(topic)
	n := r.uvarint()
	if r.err == nil && n > uint64(len(p)) {
		r.err = fmt.Errorf("batch count %d exceeds payload", n)
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		part := r.uvarint()
		b := r.bytes()
		pb := PartitionBatch{Partition: int32(uint32(part)), Batch: b}
		switch version {
		case appendKeysVersion:
			pb.Keys = r.keysV2()
		case appendKeysVersionV3, appendCodecsVersion, appendProducerVersion:
			pb.Keys = r.keysV3()
		}
		a.Batches = append(a.Batches, pb)
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d trailing bytes", len(r.b))
	}
	if r.err != nil {
		return Append{}, fmt.Errorf("%w: append: %v", backend.ErrBadCommand, r.err)
	}
	a.producers = version == appendProducerVersion
	return a, nil
}

// keysV2 decodes a batch's keys listed whole (version 2).
func (r *reader) keysV2() []RecordKey {
	nk := r.uvarint()
	if r.err == nil && nk > uint64(len(r.b)) {
		r.err = fmt.Errorf("key count %d exceeds payload", nk)
	}
	if r.err != nil {
		return nil
	}
	keys := make([]RecordKey, 0, nk)
	for j := uint64(0); j < nk && r.err == nil; j++ {
		k := RecordKey{Index: int32(uint32(r.uvarint())), Key: string(r.bytes())}
		copy(k.Digest[:], r.fixed(len(k.Digest)))
		keys = append(keys, k)
	}
	return keys
}

// keysV3 decodes a batch's front-coded keys (version 3) into the
// scratch's buffer, after the keys of the command's earlier batches, each
// key a string aliasing it (see keyScratch). A key is at most
// dedup.MaxIdempotencyKeyBytes long, which bounds what a damaged entry
// can make this allocate. The loop parses its slice directly: it runs for
// every keyed record on every replica.
func (r *reader) keysV3() []RecordKey {
	nk := r.uvarint()
	if r.err == nil && nk > uint64(len(r.b)) {
		r.err = fmt.Errorf("key count %d exceeds payload", nk)
	}
	if r.err != nil {
		return nil
	}
	keys, ends := r.keys.take(int(nk))
	buf := r.keys.buf
	first := len(buf) // this batch's keys start here
	b := r.b
	prevIndex, prevStart, prevLen := int64(-1), 0, 0
	for j := range keys {
		delta, n1 := binary.Varint(b)
		if n1 <= 0 {
			r.err = fmt.Errorf("key %d: bad index", j)
			return nil
		}
		shared, n2 := binary.Uvarint(b[n1:])
		if n2 <= 0 {
			r.err = fmt.Errorf("key %d: bad shared length", j)
			return nil
		}
		b = b[n1+n2:]
		sl, n3 := binary.Uvarint(b)
		if n3 <= 0 || sl > uint64(len(b)-n3) || len(b)-n3-int(sl) < len(dedup.Digest{}) {
			r.err = fmt.Errorf("key %d: bad suffix", j)
			return nil
		}
		suffix := b[n3 : n3+int(sl)]
		b = b[n3+int(sl):]
		copy(keys[j].Digest[:], b)
		b = b[len(dedup.Digest{}):]
		index := prevIndex + 1 + delta
		switch {
		case index < math.MinInt32 || index > math.MaxInt32: // validateAppend checks the range
			r.err = fmt.Errorf("key %d: record index %d", j, index)
			return nil
		case shared > uint64(prevLen):
			r.err = fmt.Errorf("key %d shares %d bytes with a key of %d", j, shared, prevLen)
			return nil
		case int(shared)+len(suffix) > dedup.MaxIdempotencyKeyBytes:
			r.err = fmt.Errorf("key %d of %d bytes", j, int(shared)+len(suffix))
			return nil
		}
		start := len(buf)
		buf = append(buf, buf[prevStart:prevStart+int(shared)]...)
		buf = append(buf, suffix...)
		keys[j].Index, ends[j] = int32(index), len(buf)-first
		prevIndex, prevStart, prevLen = index, start, len(buf)-start
	}
	r.b, r.keys.buf = b, buf
	// buf[first:] is not written again until the next decode: a later
	// batch of this command appends past it, or to a new array if it grows.
	all, start := unsafe.String(unsafe.SliceData(buf[first:]), len(buf)-first), 0
	for j, end := range ends {
		keys[j].Key = all[start:end]
		start = end
	}
	return keys
}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i+8 <= n && a[i:i+8] == b[i:i+8] {
		i += 8
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// reader decodes uvarint-framed fields, remembering the first error.
type reader struct {
	b    []byte
	err  error
	keys *keyScratch // where keysV3 decodes
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) fixed(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.err = fmt.Errorf("need %d bytes, have %d", n, len(r.b))
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("length %d exceeds remaining %d", n, len(r.b))
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// EncodeJSON encodes a command whose payload is JSON (every kind but
// Append and the queue's claim, ack, nack and extend), stamped with now.
// The result is unsealed and has room for the seal (Seal).
func EncodeJSON(t CommandType, now int64, body any) ([]byte, error) {
	if c, ok := body.(CreatePartitions); ok && t == CmdCreatePartitions {
		return EncodeCreatePartitions(now, c) // versioned by its fields
	}
	if c, ok := body.(DeleteTopic); ok && t == CmdDeleteTopic {
		return EncodeDeleteTopic(now, c) // versioned by its fields
	}
	switch t {
	case CmdGroupCommit, CmdGroupResetOffsets, CmdGroupAutoReset:
		return encodeGroupJSON(t, now, body) // versioned by its ends
	}
	return encodeJSONCommand(t, now, body)
}

// EncodeAppend encodes an Append, stamped with now; the batches are copied
// once, into the entry. The result is unsealed and has room for the seal.
func EncodeAppend(now int64, a Append) []byte { return encodeAppend(now, a) }

// Seal marks an encoded command as checksummed and appends the checksum
// (see sealEntry); sealing the same buffer again gives the same entry.
func Seal(data []byte) []byte { return sealEntry(data) }
