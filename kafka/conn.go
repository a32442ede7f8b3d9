package kafka

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/internal/membudget"
)

// conn is one client connection: a goroutine reads requests (serve's
// reader) and another handles them in order and writes their responses
// (serve itself), so a client may pipeline requests while each is still
// handled after the one before it.
type conn struct {
	s  *Server
	nc net.Conn
	// ctx ends when the connection or the server does. pollCtx also ends
	// when the reader finds the client gone: a long poll for it stops,
	// while the requests it read before are still handled (an acks=0
	// produce is appended, as Kafka does).
	ctx, pollCtx       context.Context
	cancel, pollCancel context.CancelFunc
	// out is the response buffer, reused from one response to the next.
	out []byte
	// principal is who the connection authenticated as, and method how
	// (auth.go); set before the first request is read.
	principal auth.Principal
	method    string
	// sasl is the connection's SASL exchange (auth_sasl.go), and
	// saslPending says it must authenticate by SASL before any request
	// but ApiVersions, SaslHandshake and SaslAuthenticate.
	sasl        saslState
	saslPending bool
	// preAuth mirrors saslPending for the reader, which bounds the
	// requests of a connection still to authenticate by SASL
	// (maxPreAuthBytes).
	preAuth atomic.Bool
	// closeAfter, if set, closes the connection once the response being
	// written is (a failed SASL authentication), with its reason.
	closeAfter string
	// broker is "" for a client's connection to this node, and a node's
	// id for the stand-in of a client's connection to that node, which
	// forwards the share requests it carries (share_forward.go): share
	// sessions are per member and broker.
	broker string
}

// request is a request read whole, with the budget it holds.
type request struct {
	h    requestHeader
	body []byte
	// charge is what the request holds of the server's request budget,
	// released once it is answered.
	charge *membudget.Charge
	start  time.Time
	// closeReason, if set, closes the connection once the requests before
	// this one are answered (a request Kafka would close it for).
	closeReason string
	// raw: body is a raw SASL token, which follows a SaslHandshake v0
	// without a Kafka header (auth_sasl.go).
	raw bool
	// next, on a SaslHandshake v0 and on a raw token, is where the
	// handler tells the reader whether the next frame is a raw token:
	// the reader waits for it before reading on.
	next chan bool
}

func newConn(s *Server, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(s.ctx)
	pollCtx, pollCancel := context.WithCancel(ctx)
	return &conn{s: s, nc: nc, ctx: ctx, cancel: cancel, pollCtx: pollCtx, pollCancel: pollCancel}
}

// serve runs the connection until the client or the server closes it, or
// a request closes it.
func (c *conn) serve() {
	defer c.nc.Close()
	defer c.cancel()
	// Kafka releases the records of the share sessions a connection
	// carried when it closes (share_coordinator.go).
	defer c.s.share.connClosed(c)
	defer c.s.shareConnClosed(c)
	if !c.authenticate() {
		return
	}
	reqs := make(chan *request, c.s.limits.ReadAhead-1)
	readerDone := make(chan struct{})
	// The reader keeps the context it starts with: the handler goroutine
	// replaces c.ctx with one naming a SASL principal.
	readCtx := c.ctx
	go func() {
		defer close(readerDone)
		defer close(reqs)
		if !c.read(readCtx, reqs) {
			c.pollCancel()
		}
	}()
	defer func() {
		// Unblock and drain the reader, releasing what it charged.
		c.cancel()
		c.nc.Close()
		for r := range reqs {
			r.charge.Release()
		}
		<-readerDone
	}()
	for r := range reqs {
		ok := c.handle(r)
		r.charge.Release()
		if !ok {
			return
		}
	}
}

// read reads requests into reqs until the connection fails (false) or a
// request closes it (true).
func (c *conn) read(ctx context.Context, reqs chan<- *request) bool {
	l := c.s.limits
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var size [4]byte
	raw := false // the next frame is a raw SASL token
	for {
		if l.IdleTimeout > 0 {
			c.nc.SetReadDeadline(time.Now().Add(l.IdleTimeout))
		}
		if _, err := io.ReadFull(br, size[:]); err != nil {
			return false
		}
		n := int64(int32(binary.BigEndian.Uint32(size[:])))
		if c.preAuth.Load() && n > maxPreAuthBytes {
			c.s.metrics.unauthenticated.WithLabelValues("sasl_size").Inc()
			c.s.logger.Debug("kafka: closing connection: request before SASL authentication too large", "remote", c.nc.RemoteAddr().String(), "size", n, "max", maxPreAuthBytes)
			return false
		}
		if n < minRequestBytes || l.MaxRequestBytes > 0 && n > l.MaxRequestBytes {
			c.s.metrics.refused.WithLabelValues("size").Inc()
			c.s.logger.Debug("kafka: closing connection: request size out of bounds", "remote", c.nc.RemoteAddr().String(), "size", n, "max", l.MaxRequestBytes)
			return false
		}
		charge, err := c.s.budget.Acquire(ctx, "", n, -1)
		if err != nil {
			return false
		}
		r := &request{charge: charge}
		if l.RequestTimeout > 0 {
			d := l.RequestTimeout
			if l.RequestMinRate > 0 {
				d += time.Duration(n * int64(time.Second) / l.RequestMinRate)
			}
			c.nc.SetReadDeadline(time.Now().Add(d))
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(br, buf); err != nil {
			charge.Release()
			return false
		}
		r.start = time.Now()
		if raw {
			r.raw, r.body = true, buf
		} else {
			r.h, r.body, r.closeReason = parseRequest(buf)
		}
		if r.raw || r.closeReason == "" && r.h.key == keySaslHandshake && r.h.version == 0 {
			r.next = make(chan bool, 1)
		}
		select {
		case reqs <- r:
		case <-ctx.Done():
			charge.Release()
			return false
		}
		if r.closeReason != "" {
			return true
		}
		if r.next != nil {
			select {
			case raw = <-r.next:
			case <-ctx.Done():
				return false
			}
		}
	}
}

// parseRequest reads a request's header; a request that closes the
// connection comes back with its reason.
func parseRequest(buf []byte) (requestHeader, []byte, string) {
	h, body, err := parseHeader(buf)
	if err != nil {
		return h, nil, "malformed"
	}
	if h.key == keyApiVersions {
		// Any version is answered (versions.go); from version 3 the
		// header has tags, and a version above ours is not read further.
		if h.version >= 3 && served(h.key, h.version) {
			if body, err = skipHeaderTags(body); err != nil {
				return h, nil, "malformed"
			}
		}
		return h, body, ""
	}
	if !served(h.key, h.version) && !answeredOld(h.key, h.version) {
		return h, nil, "unsupported"
	}
	req := kmsg.RequestForKey(h.key)
	req.SetVersion(h.version)
	if req.IsFlexible() {
		if body, err = skipHeaderTags(body); err != nil {
			return h, nil, "malformed"
		}
	}
	return h, body, ""
}

// handle answers one request; false closes the connection.
func (c *conn) handle(r *request) bool {
	s := c.s
	if r.closeReason != "" {
		s.metrics.refused.WithLabelValues(r.closeReason).Inc()
		s.logger.Debug("kafka: closing connection", "reason", r.closeReason, "remote", c.nc.RemoteAddr().String(),
			"client_id", r.h.clientID, "api", apiName(r.h.key), "version", r.h.version)
		return false
	}
	if r.raw {
		return c.handleRawSASL(r)
	}
	if r.next != nil {
		// A SaslHandshake v0: raw tokens follow once it succeeded.
		defer func() { r.next <- c.sasl.mech != "" && !c.sasl.done && c.closeAfter == "" }()
	}
	if c.saslPending && !saslAllowed(r.h.key) {
		s.metrics.unauthenticated.WithLabelValues("sasl_required").Inc()
		s.logger.Debug("kafka: closing connection: authentication required", "remote", c.nc.RemoteAddr().String(),
			"client_id", r.h.clientID, "api", apiName(r.h.key))
		return false
	}
	api := apiName(r.h.key)
	rc := &reqCtx{c: c, key: r.h.key}
	defer rc.releaseAnswer()
	resp, err := c.dispatch(rc, r)
	if err != nil {
		// The body did not parse: Kafka closes the connection.
		s.metrics.refused.WithLabelValues("malformed").Inc()
		s.logger.Debug("kafka: closing connection: malformed request", "remote", c.nc.RemoteAddr().String(),
			"client_id", r.h.clientID, "api", api, "version", r.h.version, "err", err)
		return false
	}
	s.metrics.requests.WithLabelValues(api).Inc()
	for code := range rc.codes {
		s.metrics.errors.WithLabelValues(api, errorName(code)).Inc()
	}
	defer func() { s.metrics.latency.WithLabelValues(api).Observe(time.Since(r.start).Seconds()) }()
	if resp == nil {
		return true // acks=0: no response
	}
	if s.limits.WriteTimeout > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(s.limits.WriteTimeout))
	}
	var werr error
	if fr, ok := resp.(*kmsg.FetchResponse); ok {
		// Written around the stored batches, not copied (fetch_frame.go).
		var bufs net.Buffers
		if bufs, c.out, ok = fetchFrame(c.out[:0], r.h, fr); ok {
			_, werr = bufs.WriteTo(c.nc)
			resp = nil
		}
	}
	if resp != nil {
		c.out = appendResponse(c.out[:0], r.h, resp)
		_, werr = c.nc.Write(c.out)
	}
	if cap(c.out) > 1<<20 {
		c.out = nil // do not keep a large fetch's buffer per connection
	}
	if c.closeAfter != "" {
		s.metrics.unauthenticated.WithLabelValues(c.closeAfter).Inc()
		return false
	}
	return werr == nil
}

// reqCtx is a request's context for its handler: the connection and key
// it authorizes with (auth.go), and what the handler reports besides its
// response: the error codes it answered, for the metrics.
type reqCtx struct {
	c     *conn
	key   int16
	codes map[int16]struct{}
	// answers is what the answer holds of the answer budget (fetch.go),
	// released once it is written.
	answers []*membudget.Charge
}

// releaseAnswer gives back what the answer holds of the answer budget.
func (rc *reqCtx) releaseAnswer() {
	for _, c := range rc.answers {
		c.Release()
	}
	rc.answers = nil
}

// note records an error code answered (NONE is not recorded).
func (rc *reqCtx) note(code int16) {
	if code == errNone {
		return
	}
	if rc.codes == nil {
		rc.codes = map[int16]struct{}{}
	}
	rc.codes[code] = struct{}{}
}

// errNoResponse is what a handler returns for a request that gets no
// response (a produce with acks=0).
var errNoResponse = errors.New("no response")

// dispatch decodes a request and calls its handler. It returns the
// response (nil: none is sent) or the error of a body that did not parse.
func (c *conn) dispatch(rc *reqCtx, r *request) (kmsg.Response, error) {
	if r.h.key == keyApiVersions {
		resp := c.s.apiVersions(r.h, r.body)
		rc.note(resp.(*kmsg.ApiVersionsResponse).ErrorCode)
		return resp, nil
	}
	req, err := decodeRequest(r.h, r.body)
	if err != nil {
		return nil, err
	}
	if !served(r.h.key, r.h.version) {
		return unsupportedOld(rc, req), nil // answeredOld (old_versions.go)
	}
	ctx := c.ctx
	var resp kmsg.Response
	switch req := req.(type) {
	case *kmsg.MetadataRequest:
		resp = c.s.metadata(ctx, rc, req)
	case *kmsg.ProduceRequest:
		var err error
		resp, err = c.s.produce(ctx, rc, req)
		if errors.Is(err, errNoResponse) {
			return nil, nil
		}
	case *kmsg.FetchRequest:
		resp = c.s.fetch(c.pollCtx, rc, req)
	case *kmsg.ListOffsetsRequest:
		resp = c.s.listOffsets(ctx, rc, req)
	case *kmsg.CreateTopicsRequest:
		resp = c.s.createTopics(ctx, rc, req)
	case *kmsg.DeleteTopicsRequest:
		resp = c.s.deleteTopics(ctx, rc, req)
	case *kmsg.DescribeConfigsRequest:
		resp = c.s.describeConfigs(ctx, rc, req)
	case *kmsg.IncrementalAlterConfigsRequest:
		resp = c.s.incrementalAlterConfigs(ctx, rc, req)
	case *kmsg.CreatePartitionsRequest:
		resp = c.s.createPartitions(ctx, rc, req)
	case *kmsg.AlterConfigsRequest:
		resp = c.s.alterConfigs(ctx, rc, req)
	case *kmsg.InitProducerIDRequest:
		resp = c.s.initProducerID(ctx, rc, req)
	case *kmsg.SASLHandshakeRequest:
		resp = c.s.saslHandshake(rc, req)
	case *kmsg.SASLAuthenticateRequest:
		resp = c.s.saslAuthenticate(rc, req)
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		resp = c.s.describeUserSCRAM(rc, req)
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		resp = c.s.alterUserSCRAM(ctx, rc, req)
	case *kmsg.FindCoordinatorRequest:
		resp = c.s.findCoordinator(ctx, rc, req)
	case *kmsg.JoinGroupRequest:
		resp = c.s.joinGroup(ctx, rc, req, r.h.clientID, c.remoteHost())
	case *kmsg.SyncGroupRequest:
		resp = c.s.syncGroup(ctx, rc, req)
	case *kmsg.HeartbeatRequest:
		resp = c.s.heartbeat(ctx, rc, req)
	case *kmsg.LeaveGroupRequest:
		resp = c.s.leaveGroup(ctx, rc, req)
	case *kmsg.OffsetCommitRequest:
		resp = c.s.offsetCommit(ctx, rc, req)
	case *kmsg.OffsetFetchRequest:
		resp = c.s.offsetFetch(ctx, rc, req)
	case *kmsg.OffsetDeleteRequest:
		resp = c.s.offsetDelete(ctx, rc, req)
	case *kmsg.ListGroupsRequest:
		resp = c.s.listGroups(ctx, rc, req)
	case *kmsg.DescribeGroupsRequest:
		resp = c.s.describeGroups(ctx, rc, req)
	case *kmsg.DeleteGroupsRequest:
		resp = c.s.deleteGroups(ctx, rc, req)
	case *kmsg.ShareGroupHeartbeatRequest:
		resp = c.s.shareGroupHeartbeat(ctx, rc, req, r.h.clientID, c.remoteHost())
	case *kmsg.ShareGroupDescribeRequest:
		resp = c.s.shareGroupDescribe(ctx, rc, req)
	case *kmsg.DescribeShareGroupOffsetsRequest:
		resp = c.s.describeShareGroupOffsets(ctx, rc, req)
	case *kmsg.AlterShareGroupOffsetsRequest:
		resp = c.s.alterShareGroupOffsets(ctx, rc, req)
	case *kmsg.DeleteShareGroupOffsetsRequest:
		resp = c.s.deleteShareGroupOffsets(ctx, rc, req)
	case *kmsg.ShareFetchRequest:
		resp = c.s.shareFetch(c.pollCtx, rc, req)
	case *kmsg.ShareAcknowledgeRequest:
		resp = c.s.shareAcknowledge(ctx, rc, req)
	default:
		// served() admitted a key without a handler: a bug, and the
		// client is told so rather than left waiting.
		return nil, fmt.Errorf("no handler for %s", apiName(r.h.key))
	}
	return resp, nil
}

// decodeRequest decodes the body of a served request.
func decodeRequest(h requestHeader, body []byte) (kmsg.Request, error) {
	req := kmsg.RequestForKey(h.key)
	req.SetVersion(h.version)
	if err := req.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s v%d: %w", apiName(h.key), h.version, err)
	}
	return req, nil
}

// waitReady waits until the node may answer from its state (it has applied
// what was committed before it started; a new leader, the barrier of its
// term), at most readyWait.
func (s *Server) waitReady(ctx context.Context) bool {
	if s.b.Ready() {
		return true
	}
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	deadline := time.NewTimer(readyWait)
	defer deadline.Stop()
	for {
		select {
		case <-t.C:
			if s.b.Ready() {
				return true
			}
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}
