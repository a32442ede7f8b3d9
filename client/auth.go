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
// every call to the token src gives.
func bearer(src func(context.Context) (string, error)) connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			tok, err := src(ctx)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrTokenSource, err)
			}
			if err := checkToken(tok); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrTokenSource, err)
			}
			if tok != "" {
				req.Header().Set(authorizationHeader, "Bearer "+tok)
			}
			return next(ctx, req)
		}
	})
}
