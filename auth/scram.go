package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
)

// SCRAM credentials (RFC 5802, RFC 7677) let a Kafka client authenticate
// with a user name and a password (docs/security.md, "SCRAM
// credentials"). The cluster stores, per user and mechanism, the salt,
// the iteration count and the two keys the server needs, StoredKey and
// ServerKey: enough to check a client's proof, not enough to compute
// one, so a stolen snapshot does not hand out passwords.

// SCRAMMechanism is a SCRAM hash, named as SASL names it.
type SCRAMMechanism string

// The SCRAM mechanisms logd serves.
const (
	SCRAMSHA256 SCRAMMechanism = "SCRAM-SHA-256"
	SCRAMSHA512 SCRAMMechanism = "SCRAM-SHA-512"
)

// Bounds of a SCRAM credential. Kafka's own: at least 4096 iterations
// (RFC 7677), at most 16384.
const (
	MinSCRAMIterations = SCRAMIterations
	MaxSCRAMIterations = 16384
	maxSCRAMSaltBytes  = 64
	// MaxSCRAMPasswordLen bounds a password given to NewSCRAMCredential.
	MaxSCRAMPasswordLen = 1024
)

// ErrInvalidSCRAM is wrapped by the errors of SCRAM credentials and of a
// SCRAM exchange's messages.
var ErrInvalidSCRAM = errors.New("auth: invalid SCRAM")

// ParseSCRAMMechanism parses "SCRAM-SHA-256" or "SCRAM-SHA-512".
func ParseSCRAMMechanism(s string) (SCRAMMechanism, error) {
	switch m := SCRAMMechanism(s); m {
	case SCRAMSHA256, SCRAMSHA512:
		return m, nil
	}
	return "", fmt.Errorf("%w: unknown mechanism %q (want %s or %s)", ErrInvalidSCRAM, s, SCRAMSHA256, SCRAMSHA512)
}

// hash returns the mechanism's hash and its size (0 for an unknown one).
func (m SCRAMMechanism) hash() (func() hash.Hash, int) {
	switch m {
	case SCRAMSHA256:
		return sha256.New, sha256.Size
	case SCRAMSHA512:
		return sha512.New, sha512.Size
	}
	return nil, 0
}

// SCRAMCredential is a user's credential for one mechanism, as the
// cluster stores it. The JSON form is the replicated encoding.
type SCRAMCredential struct {
	User       string         `json:"user"`
	Mechanism  SCRAMMechanism `json:"mechanism"`
	Iterations int            `json:"iterations"`
	Salt       []byte         `json:"salt"`
	StoredKey  []byte         `json:"stored_key"`
	ServerKey  []byte         `json:"server_key"`
}

// Principal is the principal a client authenticated with c is:
// User:<user>.
func (c *SCRAMCredential) Principal() Principal { return User(c.User) }

// Validate checks the credential's fields.
func (c *SCRAMCredential) Validate() error {
	if err := checkName(c.User); err != nil {
		return fmt.Errorf("%w: user %q: %v", ErrInvalidSCRAM, c.User, err)
	}
	_, size := c.Mechanism.hash()
	switch {
	case size == 0:
		return fmt.Errorf("%w: unknown mechanism %q", ErrInvalidSCRAM, c.Mechanism)
	case c.Iterations < MinSCRAMIterations || c.Iterations > MaxSCRAMIterations:
		return fmt.Errorf("%w: %d iterations, want %d to %d", ErrInvalidSCRAM, c.Iterations, MinSCRAMIterations, MaxSCRAMIterations)
	case len(c.Salt) == 0 || len(c.Salt) > maxSCRAMSaltBytes:
		return fmt.Errorf("%w: salt of %d bytes, want 1 to %d", ErrInvalidSCRAM, len(c.Salt), maxSCRAMSaltBytes)
	case len(c.StoredKey) != size || len(c.ServerKey) != size:
		return fmt.Errorf("%w: keys are not %d bytes", ErrInvalidSCRAM, size)
	}
	return nil
}

// NewSCRAMCredential derives user's credential for m from password, with
// a salt drawn from rand (crypto/rand.Reader in production).
func NewSCRAMCredential(m SCRAMMechanism, user, password string, iterations int, rand io.Reader) (SCRAMCredential, error) {
	salt := make([]byte, scramSaltBytes)
	if _, err := io.ReadFull(rand, salt); err != nil {
		return SCRAMCredential{}, fmt.Errorf("auth: draw salt: %w", err)
	}
	return SCRAMCredentialFromSalted(m, user, password, salt, iterations)
}

// SCRAMCredentialFromSalted derives user's credential for m from password
// with the given salt and iterations: what an AlterUserScramCredentials
// request's salted password is turned into is the same derivation
// (SCRAMCredentialFromSaltedPassword).
func SCRAMCredentialFromSalted(m SCRAMMechanism, user, password string, salt []byte, iterations int) (SCRAMCredential, error) {
	if password == "" || len(password) > MaxSCRAMPasswordLen {
		return SCRAMCredential{}, fmt.Errorf("%w: password of %d bytes, want 1 to %d", ErrInvalidSCRAM, len(password), MaxSCRAMPasswordLen)
	}
	h, size := m.hash()
	if size == 0 {
		return SCRAMCredential{}, fmt.Errorf("%w: unknown mechanism %q", ErrInvalidSCRAM, m)
	}
	if iterations < MinSCRAMIterations || iterations > MaxSCRAMIterations {
		return SCRAMCredential{}, fmt.Errorf("%w: %d iterations, want %d to %d", ErrInvalidSCRAM, iterations, MinSCRAMIterations, MaxSCRAMIterations)
	}
	salted, err := pbkdf2.Key(h, password, salt, iterations, size)
	if err != nil {
		return SCRAMCredential{}, fmt.Errorf("auth: derive SCRAM keys: %w", err)
	}
	return SCRAMCredentialFromSaltedPassword(m, user, salted, salt, iterations)
}

// SCRAMCredentialFromSaltedPassword makes user's credential for m from a
// salted password (Hi(password, salt, iterations)), as a client's
// AlterUserScramCredentials request carries it.
func SCRAMCredentialFromSaltedPassword(m SCRAMMechanism, user string, salted, salt []byte, iterations int) (SCRAMCredential, error) {
	h, size := m.hash()
	if size == 0 {
		return SCRAMCredential{}, fmt.Errorf("%w: unknown mechanism %q", ErrInvalidSCRAM, m)
	}
	if len(salted) != size {
		return SCRAMCredential{}, fmt.Errorf("%w: salted password of %d bytes, want %d", ErrInvalidSCRAM, len(salted), size)
	}
	clientKey := hmacOf(h, salted, "Client Key")
	stored := h()
	stored.Write(clientKey)
	c := SCRAMCredential{
		User: user, Mechanism: m, Iterations: iterations,
		Salt: append([]byte(nil), salt...), StoredKey: stored.Sum(nil), ServerKey: hmacOf(h, salted, "Server Key"),
	}
	return c, c.Validate()
}

// CheckPassword reports whether password is the one c was derived from
// (a PLAIN authentication against a SCRAM credential). It runs the
// credential's PBKDF2 iterations and compares in constant time.
func (c *SCRAMCredential) CheckPassword(password string) bool {
	d, err := SCRAMCredentialFromSalted(c.Mechanism, c.User, password, c.Salt, c.Iterations)
	return err == nil && subtle.ConstantTimeCompare(d.StoredKey, c.StoredKey) == 1
}

func hmacOf(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// SCRAMServer is the server side of one SCRAM exchange (RFC 5802 section
// 5): the client's first message names the user, the server answers with
// its nonce, the salt and the iterations, the client proves it knows the
// password, and the server proves it knows the credential. Channel
// binding is not offered ("n" or "y" GS2 flags only), and an
// authorization identity other than the user is refused, as Kafka does.
type SCRAMServer struct {
	mech  SCRAMMechanism
	cred  SCRAMCredential
	nonce string
	// clientFirstBare and serverFirst are parts of the AuthMessage.
	clientFirstBare, serverFirst string
	user                         string
}

// NewSCRAMServer starts an exchange for mechanism m.
func NewSCRAMServer(m SCRAMMechanism) *SCRAMServer { return &SCRAMServer{mech: m} }

// ClientFirst reads the client's first message and returns the user it
// names; the caller looks up that user's credential and passes it to
// ServerFirst.
func (s *SCRAMServer) ClientFirst(msg []byte, serverNonce string) (string, error) {
	m := string(msg)
	// gs2-header: gs2-cbind-flag "," [ authzid ] ","
	flag, rest, ok := strings.Cut(m, ",")
	if !ok {
		return "", fmt.Errorf("%w: client-first-message has no GS2 header", ErrInvalidSCRAM)
	}
	if flag != "n" && flag != "y" {
		return "", fmt.Errorf("%w: channel binding is not supported", ErrInvalidSCRAM)
	}
	authzid, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return "", fmt.Errorf("%w: client-first-message has no GS2 header", ErrInvalidSCRAM)
	}
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return "", fmt.Errorf("%w: client-first-message wants n=<user>,r=<nonce>", ErrInvalidSCRAM)
	}
	for _, ext := range attrs[2:] {
		// Kafka's delegation-token extension, the one a client sends,
		// asks for a token logd does not issue.
		if strings.HasPrefix(ext, "tokenauth=") {
			return "", fmt.Errorf("%w: delegation tokens are not supported", ErrInvalidSCRAM)
		}
	}
	user, err := saslName(attrs[0][2:])
	if err != nil {
		return "", err
	}
	if authzid != "" {
		if a, err := saslName(strings.TrimPrefix(authzid, "a=")); err != nil || !strings.HasPrefix(authzid, "a=") || a != user {
			return "", fmt.Errorf("%w: the authorization identity must be the user", ErrInvalidSCRAM)
		}
	}
	cnonce := attrs[1][2:]
	if cnonce == "" || strings.ContainsAny(cnonce, ",") {
		return "", fmt.Errorf("%w: empty client nonce", ErrInvalidSCRAM)
	}
	s.clientFirstBare, s.user, s.nonce = bare, user, cnonce+serverNonce
	return user, nil
}

// saslName decodes a SCRAM user name ("=2C" is ",", "=3D" is "=").
func saslName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", fmt.Errorf("%w: bad escape in user name", ErrInvalidSCRAM)
		}
		i += 2
	}
	return b.String(), nil
}

// ServerFirst returns the server's first message for the user's
// credential c (of the exchange's mechanism).
func (s *SCRAMServer) ServerFirst(c SCRAMCredential) []byte {
	s.cred = c
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(c.Salt) + ",i=" + strconv.Itoa(c.Iterations)
	return []byte(s.serverFirst)
}

// ErrSCRAMProof means the client's proof is wrong: the wrong password.
var ErrSCRAMProof = errors.New("auth: SCRAM proof does not match")

// ClientFinal checks the client's final message and returns the
// server's final message; ErrSCRAMProof for a wrong password.
func (s *SCRAMServer) ClientFinal(msg []byte) ([]byte, error) {
	m := string(msg)
	i := strings.LastIndex(m, ",p=")
	if i < 0 {
		return nil, fmt.Errorf("%w: client-final-message has no proof", ErrInvalidSCRAM)
	}
	withoutProof, proofB64 := m[:i], m[i+3:]
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, fmt.Errorf("%w: client-final-message wants c=,r=,p=", ErrInvalidSCRAM)
	}
	cb, err := base64.StdEncoding.DecodeString(attrs[0][2:])
	if err != nil || (string(cb) != "n,," && string(cb) != "y,," && !strings.HasPrefix(string(cb), "n,a=") && !strings.HasPrefix(string(cb), "y,a=")) {
		return nil, fmt.Errorf("%w: bad channel binding", ErrInvalidSCRAM)
	}
	// The nonce must be the server's; Kafka's brokers accept one that
	// ends with it, since librdkafka sends its own nonce before the
	// server's (which begins with it already), and so does this server.
	if !strings.HasSuffix(attrs[1][2:], s.nonce) {
		return nil, fmt.Errorf("%w: nonce %q does not match %q", ErrInvalidSCRAM, attrs[1][2:], s.nonce)
	}
	h, size := s.mech.hash()
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil || len(proof) != size {
		return nil, fmt.Errorf("%w: bad proof", ErrInvalidSCRAM)
	}
	authMessage := s.clientFirstBare + "," + s.serverFirst + "," + withoutProof
	sig := hmacOf(h, s.cred.StoredKey, authMessage)
	clientKey := make([]byte, size)
	for i := range clientKey {
		clientKey[i] = proof[i] ^ sig[i]
	}
	stored := h()
	stored.Write(clientKey)
	if subtle.ConstantTimeCompare(stored.Sum(nil), s.cred.StoredKey) != 1 {
		return nil, ErrSCRAMProof
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(hmacOf(h, s.cred.ServerKey, authMessage))), nil
}
