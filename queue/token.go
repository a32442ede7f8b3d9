package queue

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
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
	return fmt.Sprintf("%d.%d.%d.%016x", t.Partition, t.Offset, t.Delivery, t.Tag)
}

// ParseToken parses a token's text form; anything else is ErrBadToken.
func ParseToken(s string) (Token, error) {
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
