package client

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
)

// Credentials. A client proves who it is with a TLS client certificate
// (Options.TLS) or a bearer token (Options.Token, Options.TokenSource); the
// server decides what that principal may do (docs/security.md). The token
// is added by a Connect interceptor, so it rides on every RPC the client
// makes: each retry, the Status calls that follow the cluster, and the
// per-member calls of ClusterStatus.

// authorizationHeader carries the bearer token.
const authorizationHeader = "Authorization"

// checkToken refuses a token that could not be sent as a header value
// unchanged: a token has no spaces or control characters.
func checkToken(tok string) error {
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("token: character %q not allowed (a token is printable ASCII without spaces)", c)
		}
	}
	return nil
}

// tokenSource returns the function that gives the token of each call, nil
// when the client sends none.
func (o Options) tokenSource() func(context.Context) (string, error) {
	switch {
	case o.TokenSource != nil:
		return o.TokenSource
	case o.Token != "":
		tok := o.Token
		return func(context.Context) (string, error) { return tok, nil }
	}
	return nil
}

// ErrTokenSource is wrapped by the error of a call whose
// Options.TokenSource failed; the call was not sent. The source's own
// error is wrapped too.
var ErrTokenSource = errors.New("logd: token source failed")

// bearer returns an interceptor that sets the Authorization header of
// every call, unary or streaming, to the token src gives.
func bearer(src func(context.Context) (string, error)) connect.Interceptor {
	return bearerAuth{src: src}
}

type bearerAuth struct {
	src func(context.Context) (string, error)
}

// token returns the header value ("" for none) or the source's error.
func (b bearerAuth) token(ctx context.Context) (string, error) {
	tok, err := b.src(ctx)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrTokenSource, err)
	}
	if err := checkToken(tok); err != nil {
		return "", fmt.Errorf("%w: %w", ErrTokenSource, err)
	}
	if tok == "" {
		return "", nil
	}
	return "Bearer " + tok, nil
}

func (b bearerAuth) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		v, err := b.token(ctx)
		if err != nil {
			return nil, err
		}
		if v != "" {
			req.Header().Set(authorizationHeader, v)
		}
		return next(ctx, req)
	}
}

func (b bearerAuth) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		v, err := b.token(ctx)
		if err != nil {
			return failedConn{StreamingClientConn: conn, err: err}
		}
		if v != "" {
			conn.RequestHeader().Set(authorizationHeader, v)
		}
		return conn
	}
}

func (b bearerAuth) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// failedConn is a stream whose token source failed: nothing is sent.
type failedConn struct {
	connect.StreamingClientConn
	err error
}

func (f failedConn) Send(any) error    { return f.err }
func (f failedConn) Receive(any) error { return f.err }
