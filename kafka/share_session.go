package kafka

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/queue"
)

// maxAckRange bounds the offsets of one acknowledgement batch: a client
// acknowledges what it was handed, which one ShareFetch bounds.
const maxAckRange = 100_000

// sessionStep is what a request's ShareSessionEpoch does.
type sessionStep int

const (
	sessionOpen sessionStep = iota
	sessionNext
	sessionClose
)

// useSession checks a ShareFetch's (fetch) or ShareAcknowledge's session
// epoch for a member on cn and advances it: 0 opens a session (ShareFetch
// only; a session the member had is replaced and what it held released),
// -1 is the last request of the session, any other epoch must be the one
// the session expects, on the connection that opened it. It returns the
// step and the deliveries of a replaced session to release.
func (c *shareCoordinator) useSession(cn *conn, groupName, member string, epoch int32, fetch bool) (sessionStep, release, int16, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, m := c.memberLocked(groupName, member)
	if m == nil {
		return 0, nil, errUnknownMemberID, "not a member of the share group"
	}
	switch {
	case epoch == 0:
		if !fetch {
			return 0, nil, errInvalidShareSessionEpoch, "ShareAcknowledge cannot open a share session"
		}
		var r release
		if m.sessions[cn.broker] != nil {
			r = g.takeLocked(m.id, cn.broker)
			c.sessions--
			delete(m.sessions, cn.broker)
		}
		if c.sessions >= c.opts.maxSessions {
			return 0, r, errShareSessionLimitReached, fmt.Sprintf("this node holds %d share sessions", c.sessions)
		}
		if m.sessions == nil {
			m.sessions = map[string]*shareSession{}
		}
		m.sessions[cn.broker] = &shareSession{conn: cn, epoch: 1}
		c.sessions++
		return sessionOpen, r, errNone, ""
	}
	ss := m.sessions[cn.broker]
	switch {
	case ss == nil || ss.conn != cn:
		return 0, nil, errShareSessionNotFound, ""
	case epoch == -1:
		return sessionClose, nil, errNone, ""
	case epoch != ss.epoch:
		return 0, nil, errInvalidShareSessionEpoch, fmt.Sprintf("share session epoch %d, expected %d", epoch, ss.epoch)
	}
	ss.epoch++
	if ss.epoch == math.MaxInt32 {
		ss.epoch = 1
	}
	return sessionNext, nil, errNone, ""
}

// closeSession ends a member's session after its last request and
// returns what the member still holds, to release.
func (c *shareCoordinator) closeSession(cn *conn, groupName, member string) release {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[groupName]
	if g == nil || g.members[member] == nil {
		return nil
	}
	m := g.members[member]
	if ss := m.sessions[cn.broker]; ss == nil || ss.conn != cn {
		return nil
	}
	delete(m.sessions, cn.broker)
	c.sessions--
	return g.takeLocked(member, cn.broker)
}

// sessionParts adds add to a member's session on cn and removes forget;
// it returns the session's partitions (false: the session is gone).
func (c *shareCoordinator) sessionParts(cn *conn, groupName, member string, add, forget []sharePart) ([]sharePart, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, m := c.memberLocked(groupName, member)
	if m == nil || m.sessions[cn.broker] == nil || m.sessions[cn.broker].conn != cn {
		return nil, false
	}
	ss := m.sessions[cn.broker]
	for _, p := range add {
		if !slices.Contains(ss.parts, p) {
			ss.parts = append(ss.parts, p)
		}
	}
	ss.parts = slices.DeleteFunc(ss.parts, func(p sharePart) bool { return slices.Contains(forget, p) })
	return slices.Clone(ss.parts), true
}

// hold records the deliveries a claim handed a member in its session on
// cn; those of a member no longer in that session, or of partitions not
// in it, are returned to release.
func (c *shareCoordinator) hold(cn *conn, groupName, member, topic string, recs []backend.ClaimedRecord) release {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, m := c.memberLocked(groupName, member)
	var ss *shareSession
	if m != nil && m.sessions[cn.broker] != nil && m.sessions[cn.broker].conn == cn {
		ss = m.sessions[cn.broker]
	}
	r := release{}
	for _, rec := range recs {
		p := sharePart{topic, rec.Partition}
		if ss == nil || !slices.Contains(ss.parts, p) {
			r[topic] = append(r[topic], rec.Token)
			continue
		}
		offs := g.held[p]
		if offs == nil {
			offs = map[int64]held{}
			g.held[p] = offs
		}
		offs[rec.Offset] = held{member: member, broker: cn.broker, token: rec.Token}
	}
	return r
}

// ackBatch is one acknowledgement batch of a request: offsets first to
// last, with one type for all or one per offset.
type ackBatch struct {
	first, last int64
	types       []int8
}

// partAcks is a partition's acknowledgements.
type partAcks struct {
	part    sharePart
	batches []ackBatch
}

// pendingOp is one delivery an acknowledgement finishes, releases or
// renews.
type pendingOp struct {
	part   sharePart
	offset int64
	token  queue.Token
	kind   int8
}

// acknowledge applies a member's acknowledgements and returns each
// partition's error code. A partition with a malformed batch is
// INVALID_REQUEST, and one naming a record the member does not hold
// (never handed to it, finished, or handed to another member since its
// lock expired) is INVALID_RECORD_STATE: nothing of either is applied. A
// delivery whose lease expired while the acknowledgement was on its way
// is refused by the queue group's fencing (INVALID_RECORD_STATE) while
// the partition's other acknowledgements apply.
func (c *shareCoordinator) acknowledge(ctx context.Context, groupName, member string, acks []partAcks, renew bool) map[sharePart]int16 {
	codes := map[sharePart]int16{}
	var ops []pendingOp
	c.mu.Lock()
	g := c.groups[groupName]
	for _, pa := range acks {
		code, pops := c.checkAcksLocked(g, member, pa, renew)
		codes[pa.part] = code
		if code == errNone {
			ops = append(ops, pops...)
		}
	}
	c.mu.Unlock()
	if len(ops) == 0 {
		return codes
	}
	type key struct {
		topic string
		kind  int8
	}
	byKey := map[key][]pendingOp{}
	var keys []key
	for _, op := range ops {
		k := key{op.part.topic, op.kind}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], op)
	}
	done := map[int]queue.TokenResult{}
	failed := map[int]int16{}
	var flat []pendingOp
	for _, k := range keys {
		batch := byKey[k]
		base := len(flat)
		flat = append(flat, batch...)
		res, err := c.apply(ctx, groupName, k.topic, k.kind, batch)
		for i := range batch {
			if err != nil {
				failed[base+i] = groupCode(err)
				continue
			}
			done[base+i] = res.Results[i]
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g = c.groups[groupName]
	for i, op := range flat {
		if code, ok := failed[i]; ok {
			codes[op.part] = code
			continue
		}
		res := done[i]
		keep := op.kind == ackRenew && res.Outcome == queue.TokenOK
		if res.Outcome == queue.TokenStale {
			codes[op.part] = errInvalidRecordState
		}
		if keep || g == nil {
			continue
		}
		if h, ok := g.held[op.part][op.offset]; ok && h.token == op.token {
			delete(g.held[op.part], op.offset)
		}
	}
	return codes
}

// checkAcksLocked validates one partition's acknowledgements and returns
// the operations they ask for.
func (c *shareCoordinator) checkAcksLocked(g *shareGroup, member string, pa partAcks, renew bool) (int16, []pendingOp) {
	var ops []pendingOp
	for _, b := range pa.batches {
		n := b.last - b.first + 1
		if b.first < 0 || n <= 0 || n > maxAckRange || (len(b.types) != 1 && int64(len(b.types)) != n) {
			return errInvalidRequest, nil
		}
		for _, t := range b.types {
			if t < ackGap || t > ackRenew || (t == ackRenew && !renew) {
				return errInvalidRequest, nil
			}
		}
		for off := b.first; off <= b.last; off++ {
			t := b.types[0]
			if len(b.types) > 1 {
				t = b.types[off-b.first]
			}
			var h held
			ok := false
			if g != nil {
				h, ok = g.held[pa.part][off]
			}
			if t == ackGap {
				// No record at the offset: nothing to finish, unless
				// one was handed out there after all.
				if ok && h.member == member {
					ops = append(ops, pendingOp{pa.part, off, h.token, ackAccept})
				}
				continue
			}
			if !ok || h.member != member {
				return errInvalidRecordState, nil
			}
			ops = append(ops, pendingOp{pa.part, off, h.token, t})
		}
	}
	return errNone, ops
}

// apply runs one kind of acknowledgement of one topic's deliveries on the
// queue group: ACCEPT acks, RELEASE nacks with no delay (offered again at
// once, as Kafka releases), REJECT nacks permanently (the dead-letter
// topic, reason "rejected"), RENEW extends the lease by the lock
// duration, the queue group's lease (replicated, as shareClaim leases).
func (c *shareCoordinator) apply(ctx context.Context, groupName, topic string, kind int8, ops []pendingOp) (backend.QueueTokensResult, error) {
	var out backend.QueueTokensResult
	for len(ops) > 0 {
		n := min(len(ops), backend.MaxQueueTokens)
		part := ops[:n]
		ops = ops[n:]
		tokens := make([]queue.Token, len(part))
		for i, op := range part {
			tokens[i] = op.token
		}
		var res backend.QueueTokensResult
		var err error
		switch kind {
		case ackAccept:
			res, err = c.s.b.QueueAck(ctx, backend.QueueAck{Topic: topic, Group: groupName, Tokens: tokens})
		case ackRelease, ackReject:
			nacks := make([]queue.Nack, len(tokens))
			for i, t := range tokens {
				nacks[i] = queue.Nack{Token: t, Permanent: kind == ackReject, HasDelay: kind == ackRelease}
				if kind == ackReject {
					nacks[i].Error = "rejected by a Kafka share consumer"
				} else {
					nacks[i].Error = "released by a Kafka share consumer"
				}
			}
			res, err = c.s.b.QueueNack(ctx, backend.QueueNack{Topic: topic, Group: groupName, Nacks: nacks})
		case ackRenew:
			res, err = c.s.b.QueueExtend(ctx, backend.QueueExtend{Topic: topic, Group: groupName, Tokens: tokens})
		}
		if err != nil {
			return out, fmt.Errorf("share acknowledgement on %s: %w", topic, err)
		}
		out.Results = append(out.Results, res.Results...)
		out.DeadLettered += res.DeadLettered
	}
	return out, nil
}
