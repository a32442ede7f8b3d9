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
	"github.com/logd-dev/logd/backend"
)

// Share requests through any node (docs/kafka.md, "Share groups"). The
// share coordinator runs on the meta group's leader, while a share
// consumer sends ShareFetch and ShareAcknowledge to each partition's
// leader as Metadata names it, which with data groups is often another
// node, and the ShareGroupHeartbeats of a new group to the node
// FindCoordinator named before the group existed (the leader of the data
// group its name hashes to, as for a consumer group). That node checks the request as its own (the principal's rights
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
	// ClientID is the request header's client id (a ShareGroupHeartbeat
	// records it for the member).
	ClientID string `json:"client_id,omitempty"`
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
	return s.forwardShareFrom(ctx, rc, req, wait, "")
}

// forwardShareFrom is forwardShare of a request whose header named
// clientID.
func (s *Server) forwardShareFrom(ctx context.Context, rc *reqCtx, req kmsg.Request, wait time.Duration, clientID string) (kmsg.Response, bool) {
	lc, ok := s.b.(leaderCalls)
	if !ok || rc.c.broker != "" {
		return nil, false
	}
	body, err := json.Marshal(shareCall{Conn: s.relay.idOf(rc.c), Principal: rc.c.principal, Method: rc.c.method,
		Addr: rc.c.nc.RemoteAddr().String(), ClientID: clientID, Key: req.Key(), Version: req.GetVersion(), Body: req.AppendTo(nil)})
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
	if call.Key == keyIncrementalAlterConfigs {
		return s.answerShareConfigCall(ctx, from, call)
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
	case keyShareGroupHeartbeat:
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.SetVersion(call.Version)
		if err := req.ReadFrom(call.Body); err != nil {
			return nil, fmt.Errorf("kafka: a forwarded ShareGroupHeartbeat: %w", err)
		}
		host, _, err := net.SplitHostPort(call.Addr)
		if err != nil {
			host = call.Addr
		}
		resp = s.shareGroupHeartbeat(ctx, rc, req, call.ClientID, host)
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

// shareConfigAnswer is the leader's answer to a GROUP resource's change
// another node handed it: the resource's code and message and, when it
// was made, the group's settings after it.
type shareConfigAnswer struct {
	Code    int16  `json:"code"`
	Message string `json:"message,omitempty"`
	Reset   string `json:"reset,omitempty"`
	LockMs  int64  `json:"lock_ms,omitempty"`
	Limit   int    `json:"limit,omitempty"`
}

// shareConfigApplied bounds how long a node that handed a change of a
// share group's settings to the leader waits to apply it itself before
// it answers, so that the client's next DescribeConfigs here sees it.
const shareConfigApplied = 5 * time.Second

// forwardShareConfig hands a GROUP resource's change of
// IncrementalAlterConfigs (share_configs.go) to the meta leader, which
// alone changes a share group's settings, with the connection's
// principal: the leader checks its right again and decides; its code
// and message are the answer, given once this node applied the change
// too (or after shareConfigApplied). Without a leader to call (or for a
// stand-in, which never forwards again) the answer is NOT_CONTROLLER; a
// call that failed on the way REQUEST_TIMED_OUT, as the change may have
// been made.
func (s *Server) forwardShareConfig(ctx context.Context, rc *reqCtx, r kmsg.IncrementalAlterConfigsRequestResource) (int16, string) {
	lc, ok := s.b.(leaderCalls)
	if !ok || rc.c.broker != "" {
		return errNotController, ""
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{r}
	body, err := json.Marshal(shareCall{Principal: rc.c.principal, Method: rc.c.method, Addr: rc.c.nc.RemoteAddr().String(),
		Key: req.Key(), Version: req.GetVersion(), Body: req.AppendTo(nil)})
	if err != nil {
		return errUnknownServer, err.Error()
	}
	out, err := lc.CallLeader(ctx, shareService, body)
	if err != nil {
		code := codeFor(err, opAdmin)
		if code == errUnknownServer {
			code = errRequestTimedOut
		}
		return code, "the leader: " + errorMessage(err)
	}
	var ans shareConfigAnswer
	if err := json.Unmarshal(out, &ans); err != nil {
		return errRequestTimedOut, fmt.Sprintf("the leader's answer: %v", err)
	}
	if ans.Code == errNone {
		want := backend.ShareGroupConfig{AutoOffsetReset: ans.Reset, RecordLockDuration: time.Duration(ans.LockMs) * time.Millisecond, DeliveryCountLimit: ans.Limit}
		wctx, cancel := context.WithTimeout(ctx, shareConfigApplied)
		defer cancel()
		for s.b.ShareGroupConfig(r.ResourceName) != want {
			select {
			case <-wctx.Done():
				// A later change overtook it, or this node lags: the
				// change is made either way.
				s.logger.Debug("kafka: a share group's settings changed on the leader, not yet here", "group", r.ResourceName)
				return ans.Code, ans.Message
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return ans.Code, ans.Message
}

// answerShareConfigCall makes, on the leader, a GROUP resource's change
// another node handed it, as a request of a stand-in of the client's
// connection for this call alone: the principal's right is checked here,
// and the audit line written, naming the node.
func (s *Server) answerShareConfigCall(ctx context.Context, from string, call shareCall) ([]byte, error) {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.SetVersion(call.Version)
	if err := req.ReadFrom(call.Body); err != nil {
		return nil, fmt.Errorf("kafka: a forwarded IncrementalAlterConfigs: %w", err)
	}
	if len(req.Resources) != 1 || req.Resources[0].ResourceType != kmsg.ConfigResourceTypeGroupConfig || req.ValidateOnly {
		return nil, errors.New("kafka: a forwarded IncrementalAlterConfigs changes one GROUP resource")
	}
	r := req.Resources[0]
	c := &conn{s: s, nc: standInConn{addr: call.Addr}, ctx: ctx, pollCtx: ctx, principal: call.Principal, method: call.Method, broker: from}
	rc := &reqCtx{c: c, key: call.Key}
	code, msg := s.alterResource(ctx, rc, nil, r, false)
	ans := shareConfigAnswer{Code: code}
	if msg != nil {
		ans.Message = *msg
	}
	if code == errNone {
		cfg := s.b.ShareGroupConfig(r.ResourceName)
		ans.Reset, ans.LockMs, ans.Limit = cfg.AutoOffsetReset, cfg.RecordLockDuration.Milliseconds(), cfg.DeliveryCountLimit
	}
	return json.Marshal(ans)
}
