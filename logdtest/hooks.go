package logdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
)

// hooks count calls and run the test's interceptors in front of the
// server's handler, by procedure name ("Produce").
type hooks struct {
	errw *connect.ErrorWriter

	mu         sync.Mutex
	calls      map[string]int                           // guarded by mu
	intercepts map[string][]func(context.Context) error // guarded by mu
}

func newHooks() *hooks {
	return &hooks{errw: connect.NewErrorWriter(), calls: map[string]int{}, intercepts: map[string][]func(context.Context) error{}}
}

// servicePrefix starts the path of every LogService procedure.
const servicePrefix = "/" + logdv1connect.LogServiceName + "/"

// wrap returns next behind the hooks. An interceptor's error is written
// in the caller's protocol (Connect, gRPC or gRPC-Web) and the call does
// not reach next.
func (h *hooks) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method, ok := strings.CutPrefix(r.URL.Path, servicePrefix)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		fn := h.enter(method)
		if fn == nil {
			next.ServeHTTP(w, r)
			return
		}
		// Read the request first: net/http notices a caller that hangs up,
		// and cancels r.Context(), only once the body is consumed.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			h.errw.Write(w, r, connect.NewError(connect.CodeCanceled, fmt.Errorf("read request: %w", err)))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err := fn(r.Context()); err != nil {
			h.errw.Write(w, r, asConnectError(err))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// asConnectError keeps a *connect.Error and codes a context's end as the
// Connect handler would.
func asConnectError(err error) error {
	var ce *connect.Error
	switch {
	case errors.As(err, &ce):
		return err
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	return connect.NewError(connect.CodeUnknown, err)
}

// enter counts a call of method and takes its next interceptor, if any.
func (h *hooks) enter(method string) func(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls[method]++
	q := h.intercepts[method]
	if len(q) == 0 {
		return nil
	}
	h.intercepts[method] = q[1:]
	return q[0]
}

// Calls returns how many times method (a LogService procedure name such as
// "Produce") was called, intercepted calls included.
func (s *Server) Calls(method string) int {
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	return s.hooks.calls[method]
}

// Intercept queues fns for the next calls of method, one per call: each
// runs before the call reaches the server and, if it returns an error, the
// call fails with it without effect. A fn may block (honouring ctx, which
// ends when the caller hangs up) to play a slow server.
func (s *Server) Intercept(method string, fns ...func(context.Context) error) {
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	s.hooks.intercepts[method] = append(s.hooks.intercepts[method], fns...)
}

// FailNext makes the next len(errs) calls of method fail with errs in
// order, without effect. Error builds errors as the server does.
func (s *Server) FailNext(method string, errs ...error) {
	for _, err := range errs {
		s.Intercept(method, func(context.Context) error { return err })
	}
}

// Error builds an error the way the server answers one: a code, a message
// and, unless info is nil, an ErrorInfo detail (the reason a client acts
// on, a leader's address, a retry delay, a log's bounds).
func Error(code connect.Code, info *logdv1.ErrorInfo, format string, args ...any) *connect.Error {
	ce := connect.NewError(code, fmt.Errorf(format, args...))
	if info != nil {
		if d, err := connect.NewErrorDetail(info); err == nil {
			ce.AddDetail(d)
		}
	}
	return ce
}
