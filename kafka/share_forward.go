package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/auth"
)

// Share requests through any node (docs/kafka.md, "Share groups"). The
// share coordinator runs on the meta group's leader, while a share
// consumer sends ShareFetch and ShareAcknowledge to each partition's
// leader as Metadata names it, which with data groups is often another
// node. That node checks the request as its own (the principal's rights
// on the group and topics) and hands it whole to the leader, with the
// principal, over the calls between nodes (shareService); the leader
// serves it on a stand-in of the client's connection to that node,
// whose share sessions are the member's on that node (conn.broker), as
// Kafka keeps a session per member and broker. When the client's
// connection closes, the node tells the leader, which releases what the
// stand-in's sessions held, as it does for a connection of its own.
//
// A request still served when the close arrives releases what it got
// (a stand-in's context ends when it is dropped). A stand-in the leader
// was never told closed (its node died, or the call failed) holds its
// sessions until the member leaves or stops heartbeating; its records'
// locks expire meanwhile. A new term forgets every stand-in with the
// groups.

// shareService names the Kafka listener's calls to the meta leader.
const shareService = "kafka-share"

// shareForwardSlack is how much longer than its wait a forwarded
// request may take.
const shareForwardSlack = 15 * time.Second

// leaderCalls is the part of the backend that carries a service's calls
// to the meta group's leader (replication.Backend). CallLeader fails
// with backend.ErrNotLeader when this node leads or none is known;
// HandleLeaderCalls sets (nil: removes) the handler of a service's calls
// on this node, which answers while it leads, on the caller's node id.
type leaderCalls interface {
	CallLeader(ctx context.Context, service string, req []byte) ([]byte, error)
	HandleLeaderCalls(service string, h func(ctx context.Context, from string, req []byte) ([]byte, error))
}

// shareCall is a share request a node forwards, or the close of a
// connection whose requests it forwarded (Closed).
type shareCall struct {
	// Conn names the client's connection on the forwarding node.
	Conn   uint64 `json:"conn"`
	Closed bool   `json:"closed,omitempty"`
	// Principal and Method are who the connection authenticated as and
	// how; Addr is the client's address.
	Principal auth.Principal `json:"principal"`
	Method    string         `json:"method,omitempty"`
	Addr      string         `json:"addr,omitempty"`
	// Key, Version and Body are the request.
	Key     int16  `json:"key"`
	Version int16  `json:"version"`
	Body    []byte `json:"body,omitempty"`
}

// standInKey names a stand-in: the forwarding node and its connection.
type standInKey struct {
	node string
	conn uint64
}

// shareRelay keeps the connections this node forwarded share requests of
// and, on the leader, the stand-ins of other nodes' connections.
type shareRelay struct {
	mu       sync.Mutex
	next     uint64               // guarded by mu: the last id handed out
	ids      map[*conn]uint64     // guarded by mu: forwarded connections
	standIns map[standInKey]*conn // guarded by mu
	on       bool                 // guarded by mu: the handler is set
}

// idOf returns the id of a connection whose requests this node forwards.
func (r *shareRelay) idOf(c *conn) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id, ok := r.ids[c]; ok {
		return id
	}
	if r.ids == nil {
		r.ids = map[*conn]uint64{}
	}
	r.next++
	r.ids[c] = r.next
	return r.next
}

// forget removes a closed connection; false when it forwarded nothing.
func (r *shareRelay) forget(c *conn) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id, ok := r.ids[c]
	delete(r.ids, c)
	return id, ok
}

// standIn returns the stand-in of a connection of node, made for call
// the first time.
func (r *shareRelay) standIn(s *Server, node string, call shareCall) *conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := standInKey{node, call.Conn}
	if c := r.standIns[k]; c != nil {
		return c
	}
	if r.standIns == nil {
		r.standIns = map[standInKey]*conn{}
	}
	// Its context ends when it is dropped.
	ctx, cancel := context.WithCancel(s.ctx)
	c := &conn{s: s, nc: standInConn{addr: call.Addr}, ctx: ctx, pollCtx: ctx, cancel: cancel, pollCancel: cancel,
		principal: call.Principal, method: call.Method, broker: node}
	r.standIns[k] = c
	return c
}

// dropStandIn removes a stand-in and returns it (nil: none).
func (r *shareRelay) dropStandIn(node string, id uint64) *conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := standInKey{node, id}
	c := r.standIns[k]
	delete(r.standIns, k)
	if c != nil {
		c.cancel()
	}
	return c
}

// dropStandIns forgets every stand-in (a new term: their sessions went
// with the groups).
func (r *shareRelay) dropStandIns() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.standIns {
		c.cancel()
	}
	r.standIns = nil
}

// standInConn is the network side of a stand-in: only the client's
// address, for the answer budget's key.
type standInConn struct {
	net.Conn
	addr string
}

func (c standInConn) RemoteAddr() net.Addr { return standInAddr(c.addr) }
func (c standInConn) Close() error         { return nil }

// standInAddr is a client's address as the forwarding node saw it.
type standInAddr string

func (a standInAddr) Network() string { return "tcp" }
func (a standInAddr) String() string  { return string(a) }

// serveLeaderCalls sets the handler of the share calls of other nodes,
// once, when the backend carries calls between nodes.
func (s *Server) serveLeaderCalls() {
	lc, ok := s.b.(leaderCalls)
	if !ok {
		return
	}
	s.relay.mu.Lock()
	defer s.relay.mu.Unlock()
	if !s.relay.on {
		s.relay.on = true
		lc.HandleLeaderCalls(shareService, s.answerShareCall)
	}
}

// stopLeaderCalls removes the handler serveLeaderCalls set.
func (s *Server) stopLeaderCalls() {
	lc, ok := s.b.(leaderCalls)
	if !ok {
		return
	}
	s.relay.mu.Lock()
	defer s.relay.mu.Unlock()
	if s.relay.on {
		s.relay.on = false
		lc.HandleLeaderCalls(shareService, nil)
	}
}

// forwardShare hands a share request this node does not serve (it does
// not lead) to the leader and returns its answer; false when it cannot
// (no leader to call, the call failed, or rc is itself a stand-in), and
// the caller answers NOT_LEADER_OR_FOLLOWER, after which the client
// looks up the leaders again and retries.
func (s *Server) forwardShare(ctx context.Context, rc *reqCtx, req kmsg.Request, wait time.Duration) (kmsg.Response, bool) {
	lc, ok := s.b.(leaderCalls)
	if !ok || rc.c.broker != "" {
		return nil, false
	}
	body, err := json.Marshal(shareCall{Conn: s.relay.idOf(rc.c), Principal: rc.c.principal, Method: rc.c.method,
		Addr: rc.c.nc.RemoteAddr().String(), Key: req.Key(), Version: req.GetVersion(), Body: req.AppendTo(nil)})
	if err != nil {
		return nil, false
	}
	cctx, cancel := context.WithTimeout(ctx, wait+shareForwardSlack)
	defer cancel()
	out, err := lc.CallLeader(cctx, shareService, body)
	if err != nil {
		s.logger.Debug("kafka: share request not forwarded to the leader", "key", req.Key(), "err", err)
		return nil, false
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(out); err != nil {
		s.logger.Warn("kafka: the leader's share answer", "key", req.Key(), "err", err)
		return nil, false
	}
	return resp, true
}

// shareConnClosed tells the leader that a connection whose share
// requests this node forwarded closed, so that it releases what the
// connection's sessions held.
func (s *Server) shareConnClosed(c *conn) {
	id, ok := s.relay.forget(c)
	lc, lok := s.b.(leaderCalls)
	if !ok || !lok {
		return
	}
	body, err := json.Marshal(shareCall{Conn: id, Closed: true})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 5*time.Second)
	defer cancel()
	if _, err := lc.CallLeader(ctx, shareService, body); err != nil {
		// The leader releases them when the member leaves or its
		// session times out; their locks expire before.
		s.logger.Debug("kafka: share connection's close not told to the leader", "err", err)
	}
}

// answerShareCall serves another node's share call on the leader.
func (s *Server) answerShareCall(ctx context.Context, from string, raw []byte) ([]byte, error) {
	var call shareCall
	if err := json.Unmarshal(raw, &call); err != nil || from == "" {
		return nil, fmt.Errorf("kafka: a share call: %w", errors.Join(err, errors.New("from no node")))
	}
	if call.Closed {
		if c := s.relay.dropStandIn(from, call.Conn); c != nil {
			s.share.connClosed(c)
		}
		return nil, nil
	}
	c := s.relay.standIn(s, from, call)
	rc := &reqCtx{c: c, key: call.Key}
	defer rc.releaseAnswer()
	var resp kmsg.Response
	switch call.Key {
	case keyShareFetch:
		req := kmsg.NewPtrShareFetchRequest()
		req.SetVersion(call.Version)
		if err := req.ReadFrom(call.Body); err != nil {
			return nil, fmt.Errorf("kafka: a forwarded ShareFetch: %w", err)
		}
		resp = s.shareFetch(ctx, rc, req)
	case keyShareAcknowledge:
		req := kmsg.NewPtrShareAcknowledgeRequest()
		req.SetVersion(call.Version)
		if err := req.ReadFrom(call.Body); err != nil {
			return nil, fmt.Errorf("kafka: a forwarded ShareAcknowledge: %w", err)
		}
		resp = s.shareAcknowledge(ctx, rc, req)
	default:
		return nil, fmt.Errorf("kafka: a forwarded request of key %d", call.Key)
	}
	if c.ctx.Err() != nil {
		// The connection closed while the request was served: release
		// what a session it opened meanwhile holds.
		s.share.connClosed(c)
	}
	resp.SetVersion(call.Version)
	return resp.AppendTo(nil), nil
}
