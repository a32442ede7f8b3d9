package fsm

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/logd-dev/logd/queue"
)

// QueueCreate creates a queue group on a topic (and its dead-letter topic
// when missing). Secret is chosen at random by the leader; it seeds the
// group's delivery tokens and backoff jitter.
type QueueCreate struct {
	Topic  string       `json:"topic"`
	Group  string       `json:"group"`
	Config queue.Config `json:"config"`
	// FromEnd starts the group at each partition's end offset (only new
	// records); otherwise it works every record from offset 0.
	FromEnd bool   `json:"from_end,omitempty"`
	Secret  []byte `json:"secret"`
}

// QueueAlter replaces a queue group's settings with Config (the leader
// merges the requested changes into the current settings).
type QueueAlter struct {
	Topic  string       `json:"topic"`
	Group  string       `json:"group"`
	Config queue.Config `json:"config"`
}

// QueueClaim claims up to Max records (and MaxBytes) under a lease.
type QueueClaim struct {
	Topic    string
	Group    string
	Max      int32
	MaxBytes int32
	Lease    time.Duration
	// Worker names the claiming worker (payload version
	// queueClaimWorkerVersion, at QueueLevel; dropped below it), at most
	// queue.MaxWorkerLen bytes.
	Worker string
}

// queueClaimWorkerVersion is the queue-claim payload with a worker id
// after the lease, at QueueLevel.
const queueClaimWorkerVersion = 2

// QueueAck acknowledges deliveries.
type QueueAck struct {
	Topic  string
	Group  string
	Tokens []queue.Token
}

// QueueNack fails deliveries, transiently or permanently.
type QueueNack struct {
	Topic string
	Group string
	Nacks []queue.Nack
}

// QueueExtend extends the leases of deliveries to now+Lease.
type QueueExtend struct {
	Topic  string
	Group  string
	Lease  time.Duration
	Tokens []queue.Token
}

// Claims, acks, nacks and extends are the hot path: they use a compact
// binary payload. Create and alter are rare and use JSON.

func encodeQueueCommand(t CommandType, now int64, c any) ([]byte, error) {
	switch c := c.(type) {
	case QueueCreate, QueueAlter:
		return encodeJSONCommand(t, now, c)
	case QueueClaim:
		level := BaseLevel
		if c.Worker != "" {
			level = QueueLevel
		}
		return encodeQueueClaim(now, c, level), nil
	case QueueAck:
		dst := encodeHeader(make([]byte, 0, 32+len(c.Topic)+len(c.Group)+len(c.Tokens)*32), t, now)
		dst = queueAppendNames(dst, c.Topic, c.Group)
		return queueAppendTokens(dst, c.Tokens), nil
	case QueueExtend:
		dst := encodeHeader(make([]byte, 0, 40+len(c.Topic)+len(c.Group)+len(c.Tokens)*32), t, now)
		dst = queueAppendNames(dst, c.Topic, c.Group)
		dst = binary.AppendUvarint(dst, uint64(c.Lease))
		return queueAppendTokens(dst, c.Tokens), nil
	case QueueNack:
		dst := encodeHeader(make([]byte, 0, 32+len(c.Topic)+len(c.Group)+len(c.Nacks)*64), t, now)
		dst = queueAppendNames(dst, c.Topic, c.Group)
		dst = binary.AppendUvarint(dst, uint64(len(c.Nacks)))
		for _, n := range c.Nacks {
			dst = queueAppendToken(dst, n.Token)
			var flags byte
			if n.Permanent {
				flags |= 1
			}
			if n.HasDelay {
				flags |= 2
			}
			dst = append(dst, flags)
			dst = binary.AppendUvarint(dst, uint64(n.Delay))
			dst = binary.AppendUvarint(dst, uint64(len(n.Error)))
			dst = append(dst, n.Error...)
		}
		return dst, nil
	}
	return nil, fmt.Errorf("encode %s: unexpected %T", t, c)
}

// encodeQueueClaim writes a claim in the newest payload version a cluster
// at level reads: with the worker id from QueueLevel on (even an empty
// one, so that the first claim after an upgrade raises the applied
// level), without it below.
func encodeQueueClaim(now int64, c QueueClaim, level FeatureLevel) []byte {
	dst := encodeHeader(make([]byte, 0, 64+len(c.Topic)+len(c.Group)+len(c.Worker)), CmdQueueClaim, now)
	if level >= QueueLevel {
		dst[1] = queueClaimWorkerVersion
	}
	dst = queueAppendNames(dst, c.Topic, c.Group)
	dst = binary.AppendUvarint(dst, uint64(uint32(c.Max)))
	dst = binary.AppendUvarint(dst, uint64(uint32(c.MaxBytes)))
	dst = binary.AppendUvarint(dst, uint64(c.Lease))
	if level >= QueueLevel {
		dst = binary.AppendUvarint(dst, uint64(len(c.Worker)))
		dst = append(dst, c.Worker...)
	}
	return dst
}

// EncodeQueueClaim encodes a claim for a cluster at feature level level
// (unsealed): below QueueLevel the worker id is left out.
func EncodeQueueClaim(now int64, c QueueClaim, level FeatureLevel) []byte {
	return encodeQueueClaim(now, c, level)
}

func queueAppendNames(dst []byte, topic, group string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(topic)))
	dst = append(dst, topic...)
	dst = binary.AppendUvarint(dst, uint64(len(group)))
	return append(dst, group...)
}

func queueAppendToken(dst []byte, t queue.Token) []byte {
	dst = binary.AppendUvarint(dst, uint64(uint32(t.Partition)))
	dst = binary.AppendUvarint(dst, uint64(t.Offset))
	dst = binary.AppendUvarint(dst, uint64(t.Delivery))
	return binary.BigEndian.AppendUint64(dst, t.Tag)
}

func queueAppendTokens(dst []byte, ts []queue.Token) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ts)))
	for _, t := range ts {
		dst = queueAppendToken(dst, t)
	}
	return dst
}

func queueReadToken(r *reader) queue.Token {
	t := queue.Token{Partition: int32(uint32(r.uvarint())), Offset: int64(r.uvarint()), Delivery: uint32(r.uvarint())}
	if b := r.fixed(8); b != nil {
		t.Tag = binary.BigEndian.Uint64(b)
	}
	return t
}

func queueReadTokens(r *reader) []queue.Token {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.err = fmt.Errorf("token count %d exceeds payload", n)
	}
	if r.err != nil {
		return nil
	}
	out := make([]queue.Token, 0, n) // n is at most the payload's bytes
	for i := uint64(0); i < n && r.err == nil; i++ {
		out = append(out, queueReadToken(r))
	}
	return out
}

func decodeQueueClaim(r *reader, version byte) QueueClaim {
	c := QueueClaim{Topic: string(r.bytes()), Group: string(r.bytes())}
	c.Max, c.MaxBytes = int32(uint32(r.uvarint())), int32(uint32(r.uvarint()))
	c.Lease = time.Duration(r.uvarint())
	if version >= queueClaimWorkerVersion {
		c.Worker = string(r.bytes())
	}
	return c
}

func decodeQueueAck(r *reader) QueueAck {
	c := QueueAck{Topic: string(r.bytes()), Group: string(r.bytes())}
	c.Tokens = queueReadTokens(r)
	return c
}

func decodeQueueExtend(r *reader) QueueExtend {
	c := QueueExtend{Topic: string(r.bytes()), Group: string(r.bytes())}
	c.Lease = time.Duration(r.uvarint())
	c.Tokens = queueReadTokens(r)
	return c
}

func decodeQueueNack(r *reader) QueueNack {
	c := QueueNack{Topic: string(r.bytes()), Group: string(r.bytes())}
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.err = fmt.Errorf("nack count %d exceeds payload", n)
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		nk := queue.Nack{Token: queueReadToken(r)}
		flags := r.fixed(1)
		if flags != nil {
			nk.Permanent, nk.HasDelay = flags[0]&1 != 0, flags[0]&2 != 0
		}
		nk.Delay = time.Duration(r.uvarint())
		nk.Error = string(r.bytes())
		c.Nacks = append(c.Nacks, nk)
	}
	return c
}

// EncodeQueue encodes a queue command (QueueCreate, QueueAlter,
// QueueClaim, QueueAck, QueueNack or QueueExtend, by value) of kind t,
// stamped with now and unsealed.
func EncodeQueue(t CommandType, now int64, c any) ([]byte, error) {
	return encodeQueueCommand(t, now, c)
}
