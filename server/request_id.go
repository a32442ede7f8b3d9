package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
)

// Request ids. Every call gets one: the caller's, from RequestIDHeader or
// XRequestIDHeader when it is well formed, else one made here. It is
// echoed in the response's RequestIDHeader (on errors too, whatever the
// protocol), carried to the leader when a follower forwards the call (the
// request keeps the header), and added as request_id to every line the
// server logs for the call, the audit log's included, so that a client's
// report, a follower's line and the leader's line can be matched.

const (
	// RequestIDHeader carries a call's request id, both ways.
	RequestIDHeader = "Request-Id"
	// XRequestIDHeader is the older spelling, accepted from callers.
	XRequestIDHeader = "X-Request-Id"
	// maxRequestIDLen bounds an id a caller gives; a longer one is
	// replaced rather than logged.
	maxRequestIDLen = 128
)

type requestIDKey struct{}

// requestIDFrom returns the call's request id; "" outside a call.
func requestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// validRequestID accepts 1 to maxRequestIDLen printable ASCII characters
// without spaces, so an id is safe in a header and a log line.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := range len(id) {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// newRequestID makes an id: 16 random bytes in hex.
func newRequestID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// withRequestID gives each request its id before anything else reads it
// (the request limits, authentication, forwarding).
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(RequestIDHeader)
		if !validRequestID(id) {
			id = r.Header.Get(XRequestIDHeader)
		}
		if !validRequestID(id) {
			id = newRequestID()
		}
		// The leader of a forwarded call reads the same id.
		r.Header.Set(RequestIDHeader, id)
		w.Header().Set(RequestIDHeader, id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id)))
	})
}

// requestIDHandler adds the call's request id to each record logged with
// its context.
type requestIDHandler struct{ slog.Handler }

// Handle implements slog.Handler.
func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := requestIDFrom(ctx); id != "" {
		r = r.Clone()
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h requestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(attrs)}
}

// WithGroup implements slog.Handler.
func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}
