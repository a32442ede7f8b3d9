package client

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// Identity is the caller as the answering node authenticated it.
type Identity struct {
	// Principal is "Type:Name" ("User:alice"), "User:ANONYMOUS" when the
	// call carried no credentials.
	Principal string `json:"principal"`
	// Method is how the call was authenticated: "none", "token",
	// "certificate" or "bootstrap-token".
	Method string `json:"method"`
	// Superuser is true when ACLs do not apply to the principal.
	Superuser bool `json:"superuser"`
	// AuthRequired reports the node's --auth setting: true when calls
	// without credentials are refused.
	AuthRequired bool `json:"auth_required"`
}

// WhoAmI returns the principal the node sees for this client's
// credentials.
func (c *Client) WhoAmI(ctx context.Context) (Identity, error) {
	var out Identity
	err := c.do(ctx, "WhoAmI", retryAny, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.WhoAmI(ctx, connect.NewRequest(&logdv1.WhoAmIRequest{}))
		if err != nil {
			return fromRPC(err)
		}
		m := resp.Msg
		out = Identity{Principal: m.GetPrincipal(), Method: m.GetMethod(), Superuser: m.GetSuperuser(), AuthRequired: m.GetAuthRequired()}
		return nil
	})
	if err != nil {
		return Identity{}, fmt.Errorf("whoami: %w", err)
	}
	return out, nil
}

// TokenInfo describes a bearer token; it never holds the secret.
type TokenInfo struct {
	// ID names the token: the whole token is "logd_<ID>.<secret>".
	ID string `json:"id"`
	// Principal is who the token authenticates ("User:alice").
	Principal   string `json:"principal"`
	Description string `json:"description,omitempty"`
	// Created is when the leader created it.
	Created time.Time `json:"created"`
	// Expires is when it stops being accepted; the zero time for a token
	// that does not expire.
	Expires time.Time `json:"expires"`
	// CreatedBy is the principal that created it.
	CreatedBy string `json:"created_by"`
}

func tokenInfoFromProto(t *logdv1.TokenInfo) TokenInfo {
	return TokenInfo{
		ID:          t.GetId(),
		Principal:   t.GetPrincipal(),
		Description: t.GetDescription(),
		Created:     msToTime(t.GetCreatedMs()),
		Expires:     msToTime(t.GetExpiresMs()),
		CreatedBy:   t.GetCreatedBy(),
	}
}

// CreateTokenRequest asks for a new bearer token.
type CreateTokenRequest struct {
	// Principal is who the token authenticates: "User:NAME" or a bare
	// NAME.
	Principal string
	// Description is a note for token lists (what the token is for).
	Description string
	// TTL, if positive, makes the token expire that long after it is
	// created; 0 means it does not expire.
	TTL time.Duration
}

// NewToken is a token just created: the whole credential, which the
// server shows only this once, and its description.
type NewToken struct {
	// Token is the credential to give to the client ("logd_<id>.<secret>").
	Token string    `json:"token"`
	Info  TokenInfo `json:"info"`
}

// CreateToken creates a bearer token for a principal. Keep its Token: the
// cluster stores only a verifier, so the secret cannot be shown again. It
// fails with ErrInvalidArgument for a bad principal, description or TTL,
// and is retried only when nothing can have been written (see
// RetryPolicy).
func (c *Client) CreateToken(ctx context.Context, req CreateTokenRequest) (NewToken, error) {
	if req.TTL < 0 {
		return NewToken{}, fmt.Errorf("create token: TTL %v is negative: %w", req.TTL, ErrInvalidArgument)
	}
	preq := &logdv1.CreateTokenRequest{Principal: req.Principal, Description: req.Description, TtlMs: req.TTL.Milliseconds()}
	if req.TTL > 0 && preq.TtlMs == 0 {
		preq.TtlMs = 1 // below a millisecond: expire as soon as possible, not never
	}
	var out NewToken
	err := c.do(ctx, "CreateToken", retryUnwritten, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.CreateToken(ctx, connect.NewRequest(preq))
		if err != nil {
			return fromRPC(err)
		}
		out = NewToken{Token: resp.Msg.GetToken(), Info: tokenInfoFromProto(resp.Msg.GetInfo())}
		return nil
	})
	if err != nil {
		return NewToken{}, fmt.Errorf("create token for %q: %w", req.Principal, err)
	}
	return out, nil
}

// ListTokens lists the tokens of principal ("User:NAME" or a bare NAME),
// or every token when principal is empty, in the server's order.
func (c *Client) ListTokens(ctx context.Context, principal string) ([]TokenInfo, error) {
	var out []TokenInfo
	err := c.do(ctx, "ListTokens", retryAny, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.ListTokens(ctx, connect.NewRequest(&logdv1.ListTokensRequest{Principal: principal}))
		if err != nil {
			return fromRPC(err)
		}
		out = make([]TokenInfo, 0, len(resp.Msg.GetTokens()))
		for _, t := range resp.Msg.GetTokens() {
			out = append(out, tokenInfoFromProto(t))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// RevokeToken revokes the token with this id and returns what it was: the
// next call with it is refused with ErrUnauthenticated. It fails with
// ErrUnknownToken when no token has the id. It is retried only when
// nothing can have been written: a retry after a revocation whose answer
// was lost would find the token gone.
func (c *Client) RevokeToken(ctx context.Context, id string) (TokenInfo, error) {
	var out TokenInfo
	err := c.do(ctx, "RevokeToken", retryUnwritten, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.RevokeToken(ctx, connect.NewRequest(&logdv1.RevokeTokenRequest{Id: id}))
		if err != nil {
			return fromRPC(err)
		}
		out = tokenInfoFromProto(resp.Msg.GetInfo())
		return nil
	})
	if err != nil {
		return TokenInfo{}, fmt.Errorf("revoke token %s: %w", id, err)
	}
	return out, nil
}
