package batch

import (
	"encoding/binary"

	"github.com/logd-dev/logd/internal/varint"
)

// Kafka's varint and varlong are zigzag-encoded base-128 integers, the same
// encoding as encoding/binary's Varint. A varint must fit in 32 bits.

// varintLen returns the encoded size of v.
func varintLen(v int64) int { return varint.VarintLen(v) }

// reader walks the record bytes of a batch. The first error sticks: later
// reads return zero values, so the caller checks err once per record.
type reader struct {
	b   []byte
	pos int
	err string // reason of the first failure, "" if none
}

func (r *reader) fail(reason string) {
	if r.err == "" {
		r.err = reason
	}
}

// varlong reads a zigzag varint of up to 64 bits.
func (r *reader) varlong() int64 {
	if r.err != "" {
		return 0
	}
	v, n := binary.Varint(r.b[r.pos:])
	if n <= 0 {
		if n == 0 {
			r.fail("varlong runs past the end")
		} else {
			r.fail("varlong overflows 64 bits")
		}
		return 0
	}
	r.pos += n
	return v
}

// varint reads a zigzag varint that must fit in 32 bits, as Kafka requires.
func (r *reader) varint() int32 {
	if r.err != "" {
		return 0
	}
	u, n := binary.Uvarint(r.b[r.pos:])
	if n <= 0 || n > maxVarint32Length || u > 1<<32-1 {
		if n == 0 {
			r.fail("varint runs past the end")
		} else {
			r.fail("varint overflows 32 bits")
		}
		return 0
	}
	r.pos += n
	return int32(uint32(u>>1) ^ -uint32(u&1))
}

// int8 reads one byte.
func (r *reader) int8() int8 {
	if r.err != "" {
		return 0
	}
	if r.pos >= len(r.b) {
		r.fail("record attributes run past the end")
		return 0
	}
	v := int8(r.b[r.pos])
	r.pos++
	return v
}

// bytes reads a varint length and that many bytes; -1 is null (nil) when
// nullable. The result aliases r.b and its capacity is clipped so that an
// append by the caller cannot overwrite the following bytes.
func (r *reader) bytes(what string, nullable bool) []byte {
	n := r.varint()
	if r.err != "" {
		return nil
	}
	switch {
	case n == -1 && nullable:
		return nil
	case n < 0:
		r.fail("negative " + what + " length")
		return nil
	case int(n) > len(r.b)-r.pos:
		r.fail(what + " runs past the end")
		return nil
	}
	v := r.b[r.pos : r.pos+int(n) : r.pos+int(n)]
	r.pos += int(n)
	return v
}
