package server

import "errors"

// Stand-ins for the replicated security state's types and sentinels
// (replication.TokenInfo, replication.ErrUnknownToken, ...) until they
// land; this file goes when they do.

// TokenInfo is what may be shown of a token: its verifier's public fields
// and who created it.
type TokenInfo struct {
	ID          string
	Principal   string
	Description string
	CreatedMs   int64
	ExpiresMs   int64
	CreatedBy   string
}

var (
	errUnknownToken  = errors.New("replication: unknown token")
	errTokenExists   = errors.New("replication: token already exists")
	errTooManyTokens = errors.New("replication: too many tokens")
	errTooManyACLs   = errors.New("replication: too many ACLs")
)
