package replication

import (
	"context"

	"github.com/logd-dev/logd/auth"
)

// Principal is who makes a call, as a front end authenticated it (a client
// certificate or a bearer token), in Kafka's form: a type and a name
// ("User:alice"). Authorization decisions (ACLs) are about principals.
type Principal = auth.Principal

// Anonymous is the principal of a call nobody authenticated.
var Anonymous = auth.Anonymous

type principalKey struct{}

// WithPrincipal returns ctx carrying p. A front end sets it once per call,
// after authenticating and before calling the backend; the backend and
// everything below read it with PrincipalFrom.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal ctx carries, or Anonymous if none:
// a front end that does not authenticate sets nothing, which costs its
// calls no allocation.
func PrincipalFrom(ctx context.Context) Principal {
	if p, ok := ctx.Value(principalKey{}).(Principal); ok {
		return p
	}
	return Anonymous
}
