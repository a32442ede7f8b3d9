package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

// A bearer token is "logd_<id>.<secret>": the id (16 hex digits) names it
// in lists, logs and revocations; the secret (32 random bytes, base64url)
// is shown once at creation and never stored. The cluster stores a
// Verifier: the secret's SHA-256, checked in constant time (the secret has
// 256 bits of entropy, so a fast hash is enough and a salt adds nothing),
// and SCRAM-SHA-256 keys derived at creation, so a front end speaking a
// SCRAM mechanism (the Kafka listener) can authenticate the same token.

// TokenPrefix starts every token, so a secret scanner can find leaked ones.
const TokenPrefix = "logd_"

const (
	tokenIDBytes     = 8
	tokenSecretBytes = 32
	// SCRAMIterations is the PBKDF2 iteration count of derived SCRAM keys
	// (RFC 7677's minimum).
	SCRAMIterations = 4096
	scramSaltBytes  = 16
)

// ErrInvalidToken is wrapped by the errors of parsing and validating tokens.
var ErrInvalidToken = errors.New("auth: invalid token")

// Token is a bearer credential.
type Token struct {
	ID     string
	Secret string
}

// String returns the token as a client sends it.
func (t Token) String() string { return TokenPrefix + t.ID + "." + t.Secret }

// NewToken draws a token from rand (crypto/rand.Reader in production).
func NewToken(rand io.Reader) (Token, error) {
	var b [tokenIDBytes + tokenSecretBytes]byte
	if _, err := io.ReadFull(rand, b[:]); err != nil {
		return Token{}, fmt.Errorf("auth: draw token: %w", err)
	}
	return Token{ID: hex.EncodeToString(b[:tokenIDBytes]), Secret: base64.RawURLEncoding.EncodeToString(b[tokenIDBytes:])}, nil
}

// ParseToken parses "logd_<id>.<secret>".
func ParseToken(s string) (Token, error) {
	rest, ok := strings.CutPrefix(s, TokenPrefix)
	if !ok {
		return Token{}, fmt.Errorf("%w: want %s<id>.<secret>", ErrInvalidToken, TokenPrefix)
	}
	id, secret, ok := strings.Cut(rest, ".")
	if !ok {
		return Token{}, fmt.Errorf("%w: want %s<id>.<secret>", ErrInvalidToken, TokenPrefix)
	}
	if err := ValidTokenID(id); err != nil {
		return Token{}, err
	}
	if b, err := base64.RawURLEncoding.DecodeString(secret); err != nil || len(b) != tokenSecretBytes {
		return Token{}, fmt.Errorf("%w: secret is not %d base64url bytes", ErrInvalidToken, tokenSecretBytes)
	}
	return Token{ID: id, Secret: secret}, nil
}

// ValidTokenID checks a token id: 16 lower-case hex digits.
func ValidTokenID(id string) error {
	if len(id) != 2*tokenIDBytes {
		return fmt.Errorf("%w: id %q is not %d hex digits", ErrInvalidToken, id, 2*tokenIDBytes)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("%w: id %q is not %d hex digits", ErrInvalidToken, id, 2*tokenIDBytes)
		}
	}
	return nil
}

// SCRAMKeys are a token's SCRAM-SHA-256 server-side keys (RFC 5802).
type SCRAMKeys struct {
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

// Verifier is what the cluster stores of a token: enough to check it, not
// enough to use it. The JSON form is the replicated encoding.
type Verifier struct {
	ID          string `json:"id"`
	Principal   string `json:"principal"`
	Description string `json:"description,omitempty"`
	CreatedMs   int64  `json:"created_ms"`
	// ExpiresMs is when the token stops working (0: never).
	ExpiresMs int64     `json:"expires_ms,omitempty"`
	SHA256    []byte    `json:"sha256"`
	SCRAM     SCRAMKeys `json:"scram"`
}

// NewVerifier derives t's verifier for principal p. The SCRAM salt comes
// from rand.
func NewVerifier(t Token, p Principal, description string, createdMs, expiresMs int64, rand io.Reader) (Verifier, error) {
	salt := make([]byte, scramSaltBytes)
	if _, err := io.ReadFull(rand, salt); err != nil {
		return Verifier{}, fmt.Errorf("auth: draw salt: %w", err)
	}
	sum := sha256.Sum256([]byte(t.Secret))
	salted, err := pbkdf2.Key(sha256.New, t.Secret, salt, SCRAMIterations, sha256.Size)
	if err != nil {
		return Verifier{}, fmt.Errorf("auth: derive SCRAM keys: %w", err)
	}
	clientKey := hmacSHA256(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	v := Verifier{
		ID: t.ID, Principal: p.String(), Description: description, CreatedMs: createdMs, ExpiresMs: expiresMs,
		SHA256: sum[:],
		SCRAM:  SCRAMKeys{Salt: salt, Iterations: SCRAMIterations, StoredKey: stored[:], ServerKey: hmacSHA256(salted, "Server Key")},
	}
	return v, v.Validate()
}

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// Validate checks the verifier's fields.
func (v Verifier) Validate() error {
	if err := ValidTokenID(v.ID); err != nil {
		return err
	}
	if _, err := ParsePrincipal(v.Principal); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	switch {
	case len(v.Description) > MaxNameLen:
		return fmt.Errorf("%w: description longer than %d bytes", ErrInvalidToken, MaxNameLen)
	case v.CreatedMs < 0 || v.ExpiresMs < 0:
		return fmt.Errorf("%w: negative time", ErrInvalidToken)
	case v.ExpiresMs != 0 && v.ExpiresMs <= v.CreatedMs:
		return fmt.Errorf("%w: expires before it is created", ErrInvalidToken)
	case len(v.SHA256) != sha256.Size:
		return fmt.Errorf("%w: digest is not %d bytes", ErrInvalidToken, sha256.Size)
	case len(v.SCRAM.Salt) == 0 || len(v.SCRAM.Salt) > 64 || v.SCRAM.Iterations < SCRAMIterations ||
		len(v.SCRAM.StoredKey) != sha256.Size || len(v.SCRAM.ServerKey) != sha256.Size:
		return fmt.Errorf("%w: bad SCRAM keys", ErrInvalidToken)
	}
	return nil
}

// Check reports whether t is the token v verifies and is not expired at
// nowMs. The comparison takes the same time whatever the secret.
func (v *Verifier) Check(t Token, nowMs int64) bool {
	sum := sha256.Sum256([]byte(t.Secret))
	ok := subtle.ConstantTimeCompare(sum[:], v.SHA256) == 1
	return ok && t.ID == v.ID && (v.ExpiresMs == 0 || nowMs < v.ExpiresMs)
}
