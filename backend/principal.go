package backend

import (
	"context"

	"github.com/logd-dev/logd/auth"
)

type principalKey struct{}

// WithPrincipal returns ctx carrying p, who makes the call as a front end
// authenticated it (a client certificate or a bearer token). A front end
// sets it once per call, after authenticating and before calling the
// backend; the backend and everything below read it with PrincipalFrom.
func WithPrincipal(ctx context.Context, p auth.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal ctx carries, or auth.Anonymous if
// none: a front end that does not authenticate sets nothing, which costs
// its calls no allocation.
func PrincipalFrom(ctx context.Context) auth.Principal {
	if p, ok := ctx.Value(principalKey{}).(auth.Principal); ok {
		return p
	}
	return auth.Anonymous
}
