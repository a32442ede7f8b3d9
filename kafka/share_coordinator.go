package kafka

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/queue"
)

// Keys of the share-group requests (KIP-932; docs/kafka.md, "Share
// groups").
const (
	keyShareGroupHeartbeat int16 = 76
	keyShareFetch          int16 = 78
	keyShareAcknowledge    int16 = 79
)

// Kafka error codes of the share-group requests.
const (
	errFencedMemberEpoch        int16 = 110
	errInvalidRecordState       int16 = 121
	errShareSessionNotFound     int16 = 122
	errInvalidShareSessionEpoch int16 = 123
	errShareSessionLimitReached int16 = 133
)

// shareErrorNames names the codes above for metrics and logs (errorName).
var shareErrorNames = map[int16]string{
	errFencedMemberEpoch:        "FENCED_MEMBER_EPOCH",
	errInvalidRecordState:       "INVALID_RECORD_STATE",
	errShareSessionNotFound:     "SHARE_SESSION_NOT_FOUND",
	errInvalidShareSessionEpoch: "INVALID_SHARE_SESSION_EPOCH",
	errShareSessionLimitReached: "SHARE_SESSION_LIMIT_REACHED",
}

// Defaults of the share-group fields of GroupOptions, Kafka 4.2's.
const (
	// DefaultShareSessionTimeout is how long a share-group member lives
	// without a heartbeat (group.share.session.timeout.ms); its records
	// are then released.
	DefaultShareSessionTimeout = 45 * time.Second
	// DefaultShareHeartbeatInterval is the interval members are told to
	// heartbeat at (group.share.heartbeat.interval.ms).
	DefaultShareHeartbeatInterval = 5 * time.Second
	// DefaultShareLockDuration is the acquisition lock of a record
	// delivered by ShareFetch, the queue lease
	// (group.share.record.lock.duration.ms).
	DefaultShareLockDuration = 30 * time.Second
	// DefaultMaxShareSessions bounds the node's share sessions
	// (group.share.max.share.sessions).
	DefaultMaxShareSessions = 2000
	// maxShareRecords bounds the records of one ShareFetch, whatever the
	// request asks (a claim takes at most backend.MaxQueueClaim).
	maxShareRecords = 10_000
)

// Acknowledge types of ShareFetch and ShareAcknowledge.
const (
	ackGap     int8 = 0
	ackAccept  int8 = 1
	ackRelease int8 = 2
	ackReject  int8 = 3
	ackRenew   int8 = 4
)

// shareOptions is GroupOptions' share-group part, with defaults.
type shareOptions struct {
	sessionTimeout    time.Duration
	heartbeatInterval time.Duration
	lockDuration      time.Duration
	maxSessions       int
	maxMembers        int
}

// sharePart is a topic partition of a share group.
type sharePart struct {
	topic     string
	partition int32
}

// held is a record a member holds: the delivery ShareFetch handed it, in
// its session on broker (conn.broker).
type held struct {
	member string
	broker string
	token  queue.Token
}

// shareCoordinator keeps the share groups this node coordinates: their
// members, the members' share sessions, and the deliveries each member
// holds. It is node-local and rebuilt from nothing on a new leader: the
// leases themselves are replicated (package queue), so a record held by a
// member the new leader does not know is offered again when its lock
// expires. The deliveries are kept per topic partition, so that they can
// move with the partition.
type shareCoordinator struct {
	s    *Server
	opts shareOptions

	mu       sync.Mutex
	term     uint64                 // guarded by mu: the Raft term the groups formed in
	groups   map[string]*shareGroup // guarded by mu
	sessions int                    // guarded by mu: the open share sessions
	closed   bool                   // guarded by mu
}

// shareGroup is one share group.
type shareGroup struct {
	name    string
	epoch   int32
	members map[string]*shareMember
	held    map[sharePart]map[int64]held
}

// shareMember is one member of a share group.
type shareMember struct {
	id     string
	epoch  int32
	topics []string
	// clientID and clientHost are the client's, for ShareGroupDescribe.
	clientID, clientHost string
	// assigned is the assignment last sent, to send it again only when it
	// changes.
	assigned string
	timer    *time.Timer
	// sessions are the member's share sessions by broker (conn.broker):
	// one per node the member fetches through, as Kafka keeps one per
	// (member, broker).
	sessions map[string]*shareSession
}

// shareSession is a member's share session through one node: the
// connection it is bound to (a client's here, or the stand-in of a
// client's connection to the node that forwards its requests,
// share_forward.go), the epoch the next request must carry and the
// partitions it fetches.
type shareSession struct {
	conn  *conn
	epoch int32
	parts []sharePart
}

func newShareCoordinator(s *Server, o GroupOptions) *shareCoordinator {
	return &shareCoordinator{s: s, groups: map[string]*shareGroup{}, opts: shareOptions{
		sessionTimeout:    o.ShareSessionTimeout,
		heartbeatInterval: o.ShareHeartbeatInterval,
		lockDuration:      o.ShareLockDuration,
		maxSessions:       o.MaxShareSessions,
		maxMembers:        o.MaxGroupMembers,
	}}
}

// lead reports whether this node serves share groups now (the ready Raft
// leader); a new term forgets every group, as the classic coordinator
// does (group_coordinator.go).
func (c *shareCoordinator) lead(ctx context.Context) bool {
	leads, term := c.s.leaderTerm(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	return gateTerm(leads, term, c.closed, &c.term, c.dropLocked)
}

// dropLocked forgets every group; the leases they held expire.
func (c *shareCoordinator) dropLocked() {
	for _, g := range c.groups {
		for _, m := range g.members {
			m.timer.Stop()
		}
	}
	c.groups = map[string]*shareGroup{}
	c.sessions = 0
	c.s.relay.dropStandIns()
}

// close stops the session timers.
func (c *shareCoordinator) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked()
	c.closed = true
}

// refuser returns what a share handler answers a refused request with:
// resp, with its top-level code (noted for the metrics) and message (nil
// when empty) set.
func refuser(rc *reqCtx, resp kmsg.Response, code *int16, msg **string) func(int16, string) kmsg.Response {
	return func(c int16, m string) kmsg.Response {
		rc.note(c)
		*code = c
		if m != "" {
			*msg = &m
		}
		return resp
	}
}

// shareCaller checks a ShareFetch's or ShareAcknowledge's group and
// member ids and the principal's right on the group; it returns the ids,
// or a code and a message.
func (s *Server) shareCaller(rc *reqCtx, groupID, memberID *string) (string, string, int16, string) {
	switch {
	case groupID == nil || memberID == nil || *memberID == "":
		return "", "", errInvalidRequest, "a group id and a member id are required"
	case !rc.mayGroup(*groupID):
		return "", "", errGroupAuthorizationFailed, ""
	}
	return *groupID, *memberID, errNone, ""
}

// memberLocked returns a group and its member (nil when either is
// unknown).
func (c *shareCoordinator) memberLocked(groupName, member string) (*shareGroup, *shareMember) {
	g := c.groups[groupName]
	if g == nil {
		return nil, nil
	}
	return g, g.members[member]
}

// release is the deliveries to give back, per topic.
type release map[string][]queue.Token

// anyBroker has takeLocked take a member's deliveries of every session.
const anyBroker = "\x00any"

// takeLocked removes from g every delivery member holds in its session on
// broker (anyBroker: in every session) and returns it.
func (g *shareGroup) takeLocked(member, broker string) release {
	out := release{}
	parts := make([]sharePart, 0, len(g.held))
	for p := range g.held {
		parts = append(parts, p)
	}
	sortParts(parts)
	for _, p := range parts {
		offs := g.held[p]
		for off, h := range offs {
			if h.member == member && (broker == anyBroker || h.broker == broker) {
				out[p.topic] = append(out[p.topic], h.token)
				delete(offs, off)
			}
		}
	}
	return out
}

// removeMemberLocked forgets a member, closing its session, and returns
// the deliveries it held.
func (c *shareCoordinator) removeMemberLocked(g *shareGroup, m *shareMember) release {
	m.timer.Stop()
	c.sessions -= len(m.sessions)
	m.sessions = nil
	delete(g.members, m.id)
	g.epoch++
	return g.takeLocked(m.id, anyBroker)
}

// giveBack releases deliveries without penalty: each record is offered
// again at once (a transient nack with no delay; a record past its
// delivery limit goes to the dead-letter topic, as Kafka archives it).
func (c *shareCoordinator) giveBack(groupName string, r release, why string) {
	if len(r) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(c.s.ctx, 10*time.Second)
	defer cancel()
	topics := make([]string, 0, len(r))
	for t := range r {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	for _, t := range topics {
		nacks := make([]queue.Nack, 0, len(r[t]))
		for _, tok := range r[t] {
			nacks = append(nacks, queue.Nack{Token: tok, HasDelay: true, Error: why})
		}
		for len(nacks) > 0 {
			n := min(len(nacks), backend.MaxQueueTokens)
			if _, err := c.s.b.QueueNack(ctx, backend.QueueNack{Topic: t, Group: groupName, Nacks: nacks[:n]}); err != nil {
				// The leases expire on their own.
				c.s.logger.Debug("kafka: share group release failed", "group", groupName, "topic", t, "err", err)
				break
			}
			nacks = nacks[n:]
		}
	}
}

// onSession ends a member that stopped heartbeating: its records are
// released, replicated through the queue group's nack.
func (c *shareCoordinator) onSession(groupName string, m *shareMember) {
	c.mu.Lock()
	g := c.groups[groupName]
	if c.closed || g == nil || g.members[m.id] != m {
		c.mu.Unlock()
		return
	}
	r := c.removeMemberLocked(g, m)
	topics := m.topics
	c.mu.Unlock()
	const why = "released: share-group member's session timed out"
	c.giveBack(groupName, r, why)
	c.releaseWorker(groupName, m.id, topics, why)
}

// releaseWorker releases, on each of topics, every lease the member's
// claims hold, whether this node handed them out or an earlier leader
// did (a replicated release, fsm.QueueReleaseLevel). Before every
// member's build applies it, those leases expire on their own.
func (c *shareCoordinator) releaseWorker(groupName, member string, topics []string, why string) {
	ctx, cancel := context.WithTimeout(c.s.ctx, 10*time.Second)
	defer cancel()
	for _, t := range topics {
		if _, err := c.s.b.ReleaseQueueWorker(ctx, t, groupName, shareWorker(member), why); err != nil {
			c.s.logger.Debug("kafka: share group release failed", "group", groupName, "topic", t, "member", member, "err", err)
		}
	}
}

// connClosed closes the share sessions bound to a connection and releases
// the records their members hold, as Kafka does.
func (c *shareCoordinator) connClosed(cn *conn) {
	c.mu.Lock()
	type rel struct {
		group string
		r     release
	}
	var rels []rel
	for _, name := range slices.Sorted(maps.Keys(c.groups)) {
		g := c.groups[name]
		for _, m := range g.members {
			if ss := m.sessions[cn.broker]; ss != nil && ss.conn == cn {
				delete(m.sessions, cn.broker)
				c.sessions--
				rels = append(rels, rel{name, g.takeLocked(m.id, cn.broker)})
			}
		}
	}
	c.mu.Unlock()
	for _, r := range rels {
		c.giveBack(r.group, r.r, "released: share session's connection closed")
	}
}

// ensureQueueGroups creates the queue group of a share group on each of
// topics that has none (a group created meanwhile is fine). New groups
// start at each partition's end, Kafka's share.auto.offset.reset default
// of latest, unless the group's settings, replicated, say earliest.
func (c *shareCoordinator) ensureQueueGroups(ctx context.Context, group string, topics []string) error {
	for _, t := range topics {
		if slices.Contains(c.s.b.QueueGroups(t), group) {
			continue
		}
		if _, err := c.s.b.Topic(t); err != nil {
			continue // not assigned until it exists
		}
		cfg := c.config(group)
		_, err := c.s.b.CreateQueueGroup(ctx, backend.QueueCreate{Topic: t, Group: group, FromEnd: cfg.AutoOffsetReset != "earliest",
			Config: queue.Config{Lease: c.lockFor(group), MaxDeliveries: cfg.DeliveryCountLimit}})
		if err != nil && !errors.Is(err, queue.ErrGroupExists) {
			return fmt.Errorf("create queue group %s on %s: %w", group, t, err)
		}
	}
	return nil
}
