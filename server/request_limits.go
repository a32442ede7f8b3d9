package server

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
)

// Request limits: every request passes through requestLimiter before the
// forwarder and the Connect handlers, so a body is bounded before anything
// reads it whole, on a follower (which streams a write to the leader) as
// on the leader.
//
//   - Size. A body declared larger than Limits.MaxRequestBytes is refused
//     unread; an undeclared one (chunked, or HTTP/2 without a length) is
//     cut when it passes the bound. A gzip body (Content-Encoding, the
//     Connect protocol's unary compression) is inflated here, as it is
//     read, and refused as soon as it inflates past the bound, so a small
//     compressed body never costs more than a large plain one. Compressed
//     gRPC and Connect streaming messages are inflated by Connect through
//     boundedGzip, under the same bound.
//   - Memory budget. The request's bytes are charged to the node's budget
//     before they are read: all of them at once when the length is
//     declared (a request that does not fit is refused with OVERLOADED and
//     never read), in steps as they arrive otherwise. The charge is
//     released when the handler returns, since the decoded request lives
//     until then.
//   - Time. Only the body is timed (a read deadline on the connection or
//     HTTP/2 stream, pushed back as bytes arrive at the minimum rate, and
//     lifted once the body is in), so a client that trickles its body is
//     cut while a long poll with a small body waits as long as it asked.
//     The answer has a write deadline above the longest long poll.

// defaultBudgetRetryAfter is the retry hint of a request refused by the
// memory budget: bodies in flight are served within about that time.
const defaultBudgetRetryAfter = backend.DefaultOverloadRetryAfter

// grpcFramingBytes is the room for the 5-byte gRPC frame header of a
// message of the largest size.
const grpcFramingBytes = 16

// requestLimiter applies Limits to requests.
type requestLimiter struct {
	l      Limits
	budget *budget
	errw   *connect.ErrorWriter

	tooLarge   prometheus.Counter
	overloaded prometheus.Counter
	slowBodies prometheus.Counter
}

func newRequestLimiter(l Limits, reg *prometheus.Registry) *requestLimiter {
	l = l.withDefaults()
	rl := &requestLimiter{l: l, budget: &budget{limit: l.InflightBytes}, errw: connect.NewErrorWriter()}
	rl.tooLarge = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "logd_requests_too_large_total", Help: "Requests refused because their body (as sent, or inflated) passed the request bound.",
	})
	rl.overloaded = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "logd_request_budget_refusals_total", Help: "Requests refused with OVERLOADED because the in-flight request memory budget was full.",
	})
	rl.slowBodies = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "logd_request_body_timeouts_total", Help: "Requests cut because their body arrived slower than the body deadline allows.",
	})
	inflight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "logd_request_inflight_bytes", Help: "Request bytes charged to the memory budget now.",
	}, func() float64 { return float64(rl.budget.inUse()) })
	limit := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "logd_request_budget_bytes", Help: "The in-flight request memory budget (0: unbounded).",
	}, func() float64 { return float64(max(rl.budget.limit, 0)) })
	reg.MustRegister(rl.tooLarge, rl.overloaded, rl.slowBodies, inflight, limit)
	return rl
}

// maxBytes is the request bound, or MaxInt64 when it is off.
func (rl *requestLimiter) maxBytes() int64 {
	if rl.l.MaxRequestBytes < 0 {
		return math.MaxInt64 - grpcFramingBytes
	}
	return rl.l.MaxRequestBytes
}

// wrap returns next behind the limits. Requests under exempt (the segment
// files peers fetch) get no write deadline.
func (rl *requestLimiter) wrap(next http.Handler, exempt func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rc := http.NewResponseController(w)
		// Deadlines outlive a request on an HTTP/1.1 connection, so each
		// request sets (or clears) its own. Writers that cannot take one
		// (tests' recorders) return an error that changes nothing.
		if rl.l.WriteTimeout > 0 && !exempt(r) {
			_ = rc.SetWriteDeadline(start.Add(rl.l.WriteTimeout))
		} else {
			_ = rc.SetWriteDeadline(time.Time{})
		}
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		if rl.l.BodyTimeout > 0 {
			_ = rc.SetReadDeadline(start.Add(rl.l.BodyTimeout))
		}
		limit := rl.maxBytes()
		if r.ContentLength > limit+grpcFramingBytes {
			rl.refuse(w, r, rl.errTooLarge(r.ContentLength))
			return
		}
		gz := strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip")
		b := &limitedBody{rl: rl, rc: rc, start: start, limit: limit}
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			b.limit += grpcFramingBytes
		}
		defer b.finish()
		var upfront int64
		if messageCompressed(r.Header) {
			// Connect inflates each message (boundedGzip): count the most
			// one may inflate to, up front, besides the bytes as sent.
			upfront, b.extra = limit, limit
		}
		if r.ContentLength >= 0 && !gz {
			upfront += r.ContentLength
			b.declared = true
		}
		if upfront > 0 {
			if !rl.budget.tryCharge(upfront, upfront) {
				rl.refuse(w, r, rl.errOverloaded())
				return
			}
			b.charged = upfront
		}
		b.wire = http.MaxBytesReader(w, r.Body, b.limit)
		b.src = &countingReader{r: b.wire, n: &b.wireBytes}
		if gz {
			// Inflated here, as read: Connect then sees a plain body.
			b.gzip = true
			r.Header.Del("Content-Encoding")
			r.ContentLength = -1
		}
		r.Body = b
		next.ServeHTTP(w, r)
	})
}

// messageCompressed reports whether a request's messages are compressed
// inside the body (gRPC, gRPC-Web, Connect streaming).
func messageCompressed(h http.Header) bool {
	for _, k := range []string{"Grpc-Encoding", "Connect-Content-Encoding"} {
		if v := h.Get(k); v != "" && !strings.EqualFold(v, "identity") {
			return true
		}
	}
	return false
}

// refuse answers a request the limits refused without reading it.
func (rl *requestLimiter) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if rl.errw.IsSupported(r) {
		_ = rl.errw.Write(w, r, err)
		return
	}
	status := http.StatusRequestEntityTooLarge
	if connect.CodeOf(err) == connect.CodeResourceExhausted {
		status = http.StatusTooManyRequests
	}
	http.Error(w, err.Error(), status)
}

func (rl *requestLimiter) errTooLarge(size int64) error {
	rl.tooLarge.Inc()
	msg := fmt.Sprintf("request body of %d bytes is larger than this node accepts (%d bytes)", size, rl.l.MaxRequestBytes)
	if size < 0 {
		msg = fmt.Sprintf("request body is larger than this node accepts (%d bytes, inflated if compressed)", rl.l.MaxRequestBytes)
	}
	return withInfo(connect.CodeInvalidArgument, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_RECORD_TOO_LARGE}, errors.New(msg))
}

func (rl *requestLimiter) errOverloaded() error {
	rl.overloaded.Inc()
	return withInfo(connect.CodeResourceExhausted, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_OVERLOADED, RetryAfterMs: rl.l.RetryAfter.Milliseconds()},
		fmt.Errorf("overloaded: the requests in flight hold this node's request memory budget (%d bytes); retry after %v", rl.l.InflightBytes, rl.l.RetryAfter))
}

func (rl *requestLimiter) errSlowBody(n int64, d time.Duration) error {
	rl.slowBodies.Inc()
	return connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("request body too slow: %d bytes in %v (at least %d bytes/s expected after %v)",
		n, d.Round(time.Millisecond), rl.l.BodyMinRate, rl.l.BodyTimeout))
}

// limitedBody is a request body under the limits: bounded in size (as sent
// and as inflated), charged to the budget as it arrives when its length
// was not declared, and read under a deadline that moves with the bytes
// received and is lifted at its end. One goroutine at a time reads it
// (the handler, or the forwarder's transport, which may still be reading
// when the handler returns); finish runs when the handler returns.
type limitedBody struct {
	rl    *requestLimiter
	rc    *http.ResponseController
	start time.Time
	limit int64 // bound of the body as the handler reads it
	gzip  bool
	// declared: the whole body was charged up front (its length was
	// declared); extra is what was charged besides the body's bytes.
	declared bool
	extra    int64

	wire io.ReadCloser // the request's body under http.MaxBytesReader
	src  io.Reader     // wire, counted into wireBytes

	// Owned by the reading goroutine.
	wireBytes int64
	zr        *gzip.Reader // when gzip, once its header is read
	read      int64        // bytes handed to the reader (inflated when gzip)
	deadline  time.Time    // the read deadline last set
	eof       bool
	err       error // sticky

	mu       sync.Mutex
	charged  int64 // bytes charged to the budget; guarded by mu
	finished bool  // the handler returned: charge nothing, set no deadline; guarded by mu
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.eof {
		return 0, io.EOF
	}
	// Read at most one byte past the bound, to tell "exactly the bound"
	// from "more".
	if room := b.limit - b.read + 1; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.readSource(p)
	b.read += int64(n)
	if b.read > b.limit {
		return 0, b.fail(b.rl.errTooLarge(-1))
	}
	if err := b.account(); err != nil {
		return 0, b.fail(err)
	}
	switch {
	case errors.Is(err, io.EOF):
		// The body is in: lift its deadline, so the handler (a long poll)
		// waits as long as it asked. (Go's HTTP/1.1 server lifts it too,
		// when it starts watching for the client's close; this does not
		// depend on it.)
		b.eof = true
		b.setReadDeadline(time.Time{})
		return n, io.EOF
	case err != nil:
		return n, b.fail(b.mapErr(err))
	}
	b.extendDeadline()
	return n, nil
}

// account charges the budget for the bytes read so far, in steps, when
// the body's length was not declared.
func (b *limitedBody) account() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.declared || b.read <= b.charged-b.extra {
		return nil
	}
	step := max(int64(chargeStep), b.read-(b.charged-b.extra))
	if b.finished || !b.rl.budget.tryCharge(step, b.charged+step) {
		return b.rl.errOverloaded()
	}
	b.charged += step
	return nil
}

// readSource reads the body as the handler sees it: the wire bytes, or
// their inflation.
func (b *limitedBody) readSource(p []byte) (int, error) {
	if !b.gzip {
		return b.src.Read(p)
	}
	if b.zr == nil {
		zr, err := gzip.NewReader(b.src)
		if err != nil {
			return 0, err
		}
		b.zr = zr
	}
	return b.zr.Read(p)
}

// extendDeadline moves the read deadline to BodyTimeout plus the time the
// wire bytes received buy at BodyMinRate, in steps of a second.
func (b *limitedBody) extendDeadline() {
	l := b.rl.l
	if l.BodyTimeout <= 0 || l.BodyMinRate <= 0 {
		return
	}
	dl := b.start.Add(l.BodyTimeout + time.Duration(float64(b.wireBytes)/float64(l.BodyMinRate)*float64(time.Second)))
	if dl.Sub(b.deadline) >= time.Second {
		b.deadline = dl
		b.setReadDeadline(dl)
	}
}

// setReadDeadline sets the connection's (or HTTP/2 stream's) read
// deadline while the handler runs; after it returned, the response
// writer is no longer the handler's to use.
func (b *limitedBody) setReadDeadline(t time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.finished {
		_ = b.rc.SetReadDeadline(t)
	}
}

func (b *limitedBody) mapErr(err error) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return b.rl.errTooLarge(-1)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return b.rl.errSlowBody(b.wireBytes, time.Since(b.start))
	case b.gzip && (errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, io.ErrUnexpectedEOF)):
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("gzip request body: %w", err))
	}
	return err
}

func (b *limitedBody) fail(err error) error {
	b.err = err
	return err
}

// Close leaves the request's own body to the HTTP server, which closes it
// after the handler. Closing it here, with bytes left unread after a
// refusal, would let the server take it for a body read whole and parse
// the rest as the next request on the connection: the server recognizes
// an early close only on the body it made, and this one replaced it.
func (b *limitedBody) Close() error { return nil }

// finish releases the body's charge once the handler returned; a reader
// still running (a forwarding transport) may read on but charges nothing.
func (b *limitedBody) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.finished = true
	b.rl.budget.release(b.charged)
	b.charged = 0
}

// countingReader counts the bytes read through it into *n.
type countingReader struct {
	r io.Reader
	n *int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += int64(n)
	return n, err
}
