package queue

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Token names one delivery of one record: the record's partition and
// offset, the delivery number, and a tag only the group can compute. Its
// text form is "partition.offset.delivery.tag" (tag in 16 hex digits); the
// topic and group travel beside it.
//
// The tag is a hash of the group's secret (chosen at random by the leader
// when the group was created and carried in the create command), the Raft
// index of the claim, and the record and delivery, so it is the same on
// every replica yet cannot be guessed by a client that did not receive it.
type Token struct {
	Partition int32
	Offset    int64
	Delivery  uint32
	Tag       uint64
}

// String returns the token's text form.
func (t Token) String() string {
	var b [maxTokenLen]byte
	return string(t.Append(b[:0]))
}

// maxTokenLen bounds a token's text form: the digits of an int32, an int64
// and a uint32, three dots and the 16 hex digits of the tag.
const maxTokenLen = 10 + 19 + 10 + 3 + 16

// Append appends the token's text form to b, so that a claim's answer can
// build the tokens of all its records in one buffer.
func (t Token) Append(b []byte) []byte {
	b = strconv.AppendInt(b, int64(t.Partition), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, t.Offset, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, uint64(t.Delivery), 10)
	b = append(b, '.')
	const hex = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, hex[t.Tag>>uint(shift)&0xf])
	}
	return b
}

// ParseToken parses a token's text form; anything else is ErrBadToken.
func ParseToken(s string) (Token, error) {
	if t, ok := parseCanonicalToken(s); ok {
		return t, nil
	}
	return parseTokenFields(s)
}

// parseTokenFields is ParseToken's general rule: four dot-separated
// fields read by strconv.
func parseTokenFields(s string) (Token, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 4 || len(parts[3]) != 16 {
		return Token{}, fmt.Errorf("%w: %q", ErrBadToken, s)
	}
	p, err1 := strconv.ParseInt(parts[0], 10, 32)
	off, err2 := strconv.ParseInt(parts[1], 10, 64)
	d, err3 := strconv.ParseUint(parts[2], 10, 32)
	tag, err4 := strconv.ParseUint(parts[3], 16, 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || p < 0 || off < 0 || d == 0 {
		return Token{}, fmt.Errorf("%w: %q", ErrBadToken, s)
	}
	return Token{Partition: int32(p), Offset: off, Delivery: uint32(d), Tag: tag}, nil
}

// parseCanonicalToken parses the form Append writes (decimal digits
// without sign, lower-case hex) without allocating; ok is false for
// anything else, which parseTokenFields then judges, so the fast path
// accepts nothing that would refuse and reads nothing differently.
func parseCanonicalToken(s string) (Token, bool) {
	var t Token
	p, s, ok := cutDecimal(s, math.MaxInt32)
	if !ok {
		return t, false
	}
	off, s, ok := cutDecimal(s, math.MaxInt64)
	if !ok {
		return t, false
	}
	d, s, ok := cutDecimal(s, math.MaxUint32)
	if !ok || d == 0 || len(s) != 16 {
		return t, false
	}
	var tag uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9':
			tag = tag<<4 | uint64(c-'0')
		case 'a' <= c && c <= 'f':
			tag = tag<<4 | uint64(c-'a'+10)
		default:
			return t, false
		}
	}
	return Token{Partition: int32(p), Offset: int64(off), Delivery: uint32(d), Tag: tag}, true
}

// cutDecimal reads the decimal digits of s up to its first '.', at most
// limit, and returns them and what follows the dot.
func cutDecimal(s string, limit uint64) (uint64, string, bool) {
	var n uint64
	i := 0
	for ; i < len(s) && s[i] != '.'; i++ {
		c := s[i]
		if c < '0' || c > '9' || i >= 19 {
			return 0, "", false // 19 digits can not overflow a uint64
		}
		n = n*10 + uint64(c-'0')
	}
	if i == 0 || i == len(s) || n > limit {
		return 0, "", false
	}
	return n, s[i+1:], true
}

// leaseTag computes a delivery's tag.
func leaseTag(secret []byte, index uint64, partition int32, offset int64, delivery uint32) uint64 {
	var b [64]byte
	buf := append(b[:0], secret...)
	buf = binary.BigEndian.AppendUint64(buf, index)
	buf = binary.BigEndian.AppendUint32(buf, uint32(partition))
	buf = binary.BigEndian.AppendUint64(buf, uint64(offset))
	buf = binary.BigEndian.AppendUint32(buf, delivery)
	sum := sha256.Sum256(buf)
	return binary.BigEndian.Uint64(sum[:8])
}
