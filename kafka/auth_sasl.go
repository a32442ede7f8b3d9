package kafka

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
)

// SASL on the Kafka listener (docs/kafka.md, "Authentication";
// docs/security.md, "SASL"). Each connection runs one exchange:
//
//   - SaslHandshake names the mechanism; a mechanism not enabled is
//     UNSUPPORTED_SASL_MECHANISM with the enabled ones listed. After a
//     version 1 handshake the mechanism's messages come in
//     SaslAuthenticate requests; after a version 0 one (old clients) they
//     come as raw frames, a size and the token, without a Kafka header,
//     and are answered the same way, an empty frame for PLAIN's success
//     (handleRawSASL). librdkafka needs version 0 in the advertised range
//     to use SCRAM at all, though it sends version 1.
//   - SaslAuthenticate (v0-2) carries the mechanism's messages: one for
//     PLAIN, two for SCRAM. A failure is SASL_AUTHENTICATION_FAILED, and
//     the connection is closed once it is answered, as Kafka does.
//   - Once authenticated, the connection's principal is the SASL one
//     (replacing a client certificate's), for every ACL, quota and audit
//     line. A second SaslHandshake or SaslAuthenticate is
//     ILLEGAL_SASL_STATE: re-authentication (KIP-368) is not served, and
//     session_lifetime_ms is 0.
//
// Under --auth required a connection without a certificate naming a
// principal may send only ApiVersions, SaslHandshake and SaslAuthenticate
// until it authenticates; anything else closes it.
//
// PLAIN: the user name is the principal's name ("alice" for User:alice)
// and the password either a logd token of that principal
// ("logd_<id>.<secret>") or the password of one of the user's SCRAM
// credentials. SCRAM-SHA-256 and SCRAM-SHA-512: the user name is the
// credential's user, whose principal is User:<user>.

// The SASL mechanisms the listener can serve.
const (
	MechPlain       = "PLAIN"
	MechSCRAMSHA256 = string(auth.SCRAMSHA256)
	MechSCRAMSHA512 = string(auth.SCRAMSHA512)
)

// Mechanisms lists the mechanisms SASLOptions.Mechanisms may name.
var Mechanisms = []string{MechPlain, MechSCRAMSHA256, MechSCRAMSHA512}

// maxPreAuthBytes bounds a request of a connection that must still
// authenticate by SASL (Kafka's sasl.server.max.receive.size): a larger
// one closes it.
const maxPreAuthBytes = 512 << 10

// Kafka's SASL keys and errors.
const (
	keySaslAuthenticate int16 = 36

	errIllegalSaslState       int16 = 34
	errSaslAuthenticationFail int16 = 58
)

// Credentials is where the listener reads the credentials SASL checks,
// and manages SCRAM credentials (DescribeUserScramCredentials,
// AlterUserScramCredentials); replication.Backend implements it.
type Credentials interface {
	// Token returns the verifier of the token id (PLAIN's password).
	Token(id string) (auth.Verifier, bool)
	// SCRAMCredential returns user's credential for m.
	SCRAMCredential(user string, m auth.SCRAMMechanism) (auth.SCRAMCredential, bool)
	// SCRAMCredentials lists every credential's public fields.
	SCRAMCredentials() []backend.SCRAMInfo
	// SetSCRAMCredential and DeleteSCRAMCredential change them through
	// Raft (errors as replication.Backend's).
	SetSCRAMCredential(ctx context.Context, c auth.SCRAMCredential, setBy string) (backend.SCRAMInfo, error)
	DeleteSCRAMCredential(ctx context.Context, user string, m auth.SCRAMMechanism) (backend.SCRAMInfo, error)
}

// SASLOptions configures SASL.
type SASLOptions struct {
	// Mechanisms are the enabled mechanisms (Mechanisms' names); none
	// serves no SASL: SaslHandshake is then UNSUPPORTED_SASL_MECHANISM
	// with an empty list.
	Mechanisms []string
	// Credentials is required with any mechanism enabled.
	Credentials Credentials
	// Now is the clock tokens expire by; default time.Now.
	Now func() time.Time
}

// check validates the options.
func (o SASLOptions) check() error {
	for _, m := range o.Mechanisms {
		if !slices.Contains(Mechanisms, m) {
			return fmt.Errorf("kafka: unknown SASL mechanism %q (want %s)", m, strings.Join(Mechanisms, ", "))
		}
	}
	if len(o.Mechanisms) > 0 && o.Credentials == nil {
		return errors.New("kafka: SASL mechanisms need Credentials")
	}
	return nil
}

// saslEnabled reports whether mech is enabled.
func (s *Server) saslEnabled(mech string) bool { return slices.Contains(s.sasl.Mechanisms, mech) }

// saslState is a connection's SASL exchange, read and changed only by the
// goroutine that handles its requests.
type saslState struct {
	// mech is the mechanism the handshake chose ("" before one).
	mech string
	// scram is a SCRAM exchange under way (after its first message).
	scram *auth.SCRAMServer
	// user is the user the exchange named, for the audit line.
	user string
	// done: the connection authenticated by SASL.
	done bool
}

// The authentication methods SASL adds (auth.go's names the others).
func saslMethod(mech string) string {
	return "sasl_" + strings.ToLower(strings.ReplaceAll(mech, "-", "_"))
}

// saslAllowed reports whether a request of key may be handled on a
// connection that must still authenticate by SASL.
func saslAllowed(key int16) bool {
	return key == keyApiVersions || key == keySaslHandshake || key == keySaslAuthenticate
}

// saslHandshake answers a SaslHandshake.
func (s *Server) saslHandshake(rc *reqCtx, req *kmsg.SASLHandshakeRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = append([]string{}, s.sasl.Mechanisms...)
	c := rc.c
	switch {
	case c.sasl.done || c.sasl.mech != "":
		resp.ErrorCode = errIllegalSaslState
		rc.saslAudit(req.Mechanism, resp.ErrorCode, "a second SASL authentication on one connection (re-authentication is not served)")
		c.closeAfter = "sasl_state"
	case !s.saslEnabled(req.Mechanism):
		resp.ErrorCode = errUnsupportedSaslMechanism
		rc.saslAudit(req.Mechanism, resp.ErrorCode, fmt.Sprintf("mechanism %q is not enabled (enabled: %s)", req.Mechanism, strings.Join(s.sasl.Mechanisms, ", ")))
	default:
		c.sasl.mech = req.Mechanism
	}
	rc.note(resp.ErrorCode)
	return resp
}

// saslAuthenticate answers a SaslAuthenticate: one step of the exchange
// the handshake chose.
func (s *Server) saslAuthenticate(rc *reqCtx, req *kmsg.SASLAuthenticateRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	c := rc.c
	fail := func(code int16, msg string, logged error) kmsg.Response {
		resp.ErrorCode = code
		resp.ErrorMessage = &msg
		rc.note(code)
		c.closeAfter = "sasl_failed"
		rc.saslAudit(c.sasl.mech, code, errors.Join(errors.New(msg), logged).Error())
		return resp
	}
	switch {
	case c.sasl.done:
		return fail(errIllegalSaslState, "SaslAuthenticate after a successful authentication: re-authentication is not served", nil)
	case c.sasl.mech == "":
		return fail(errIllegalSaslState, "SaslAuthenticate before a successful SaslHandshake", nil)
	}
	const badCreds = "Authentication failed: invalid credentials"
	switch c.sasl.mech {
	case MechPlain:
		p, err := s.plain(c, req.SASLAuthBytes)
		if err != nil {
			return fail(errSaslAuthenticationFail, badCreds, err)
		}
		c.saslAuthenticated(p)
		rc.saslAudit(c.sasl.mech, errNone, "")
		return resp
	default:
		mech := auth.SCRAMMechanism(c.sasl.mech)
		if c.sasl.scram == nil {
			sc := auth.NewSCRAMServer(mech)
			user, err := sc.ClientFirst(req.SASLAuthBytes, newNonce())
			c.sasl.user = user
			if err != nil {
				return fail(errSaslAuthenticationFail, badCreds, err)
			}
			cred, ok := s.sasl.Credentials.SCRAMCredential(user, mech)
			if !ok {
				return fail(errSaslAuthenticationFail, badCreds, fmt.Errorf("no %s credential for user %q", mech, user))
			}
			c.sasl.scram = sc
			resp.SASLAuthBytes = sc.ServerFirst(cred)
			return resp
		}
		final, err := c.sasl.scram.ClientFinal(req.SASLAuthBytes)
		if err != nil {
			return fail(errSaslAuthenticationFail, badCreds, err)
		}
		c.saslAuthenticated(auth.User(c.sasl.user))
		rc.saslAudit(c.sasl.mech, errNone, "")
		resp.SASLAuthBytes = final
		return resp
	}
}

// handleRawSASL answers a raw SASL token (after a SaslHandshake v0) with
// a raw frame, as SaslAuthenticate would; a failure closes the connection
// without an answer, as Kafka does. It tells the reader whether another
// raw token follows.
func (c *conn) handleRawSASL(r *request) bool {
	more := false
	defer func() { r.next <- more }()
	rc := &reqCtx{c: c, key: keySaslAuthenticate}
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SASLAuthBytes = r.body
	resp := c.s.saslAuthenticate(rc, req).(*kmsg.SASLAuthenticateResponse)
	c.s.metrics.requests.WithLabelValues(apiName(keySaslAuthenticate)).Inc()
	if resp.ErrorCode != errNone {
		c.s.metrics.errors.WithLabelValues(apiName(keySaslAuthenticate), errorName(resp.ErrorCode)).Inc()
		c.s.metrics.unauthenticated.WithLabelValues(c.closeAfter).Inc()
		return false
	}
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(resp.SASLAuthBytes)))
	frame = append(frame, resp.SASLAuthBytes...)
	if w := c.s.limits.WriteTimeout; w > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(w))
	}
	if _, err := c.nc.Write(frame); err != nil {
		return false
	}
	more = !c.sasl.done
	return true
}

// newNonce is a server nonce: 18 random bytes, base64.
func newNonce() string {
	var b [18]byte
	rand.Read(b[:])
	return base64.RawStdEncoding.EncodeToString(b[:])
}

// plain checks a PLAIN message ("authzid NUL user NUL password") and
// returns its principal.
func (s *Server) plain(c *conn, msg []byte) (auth.Principal, error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return auth.Principal{}, errors.New("PLAIN message is not authzid, user and password separated by NUL")
	}
	authzid, user, password := string(parts[0]), string(parts[1]), string(parts[2])
	c.sasl.user = user
	if authzid != "" && authzid != user {
		return auth.Principal{}, fmt.Errorf("authorization identity %q is not the user %q", authzid, user)
	}
	if err := auth.ValidName(user); err != nil {
		return auth.Principal{}, fmt.Errorf("user name: %w", err)
	}
	if strings.HasPrefix(password, auth.TokenPrefix) {
		t, err := auth.ParseToken(password)
		if err != nil {
			return auth.Principal{}, err
		}
		v, ok := s.sasl.Credentials.Token(t.ID)
		if !ok || !v.Check(t, s.sasl.Now().UnixMilli()) {
			return auth.Principal{}, fmt.Errorf("token %s is unknown, revoked, expired or wrong", t.ID)
		}
		p, err := auth.ParsePrincipal(v.Principal)
		if err != nil {
			return auth.Principal{}, err
		}
		if p.Name != user {
			return auth.Principal{}, fmt.Errorf("token %s is %s's, not user %q's", t.ID, p, user)
		}
		return p, nil
	}
	for _, m := range []auth.SCRAMMechanism{auth.SCRAMSHA512, auth.SCRAMSHA256} {
		if cred, ok := s.sasl.Credentials.SCRAMCredential(user, m); ok && cred.CheckPassword(password) {
			return cred.Principal(), nil
		}
	}
	return auth.Principal{}, fmt.Errorf("no token and no SCRAM credential of user %q matches the password", user)
}

// saslAuthenticated makes p the connection's principal.
func (c *conn) saslAuthenticated(p auth.Principal) {
	c.sasl.done, c.sasl.scram = true, nil
	c.principal, c.method = p, saslMethod(c.sasl.mech)
	c.saslPending = false
	c.preAuth.Store(false)
	c.ctx = backend.WithPrincipal(c.ctx, p)
	c.pollCtx = backend.WithPrincipal(c.pollCtx, p)
}

// saslAudit writes the audit line of an authentication: its mechanism
// and the user it named (never a password), the outcome and why.
func (rc *reqCtx) saslAudit(mech string, code int16, msg string) {
	attrs := []slog.Attr{slog.String("mechanism", mech)}
	if rc.c.sasl.user != "" {
		attrs = append(attrs, slog.String("user", rc.c.sasl.user))
	}
	rc.audit(attrs, code, msg)
}
