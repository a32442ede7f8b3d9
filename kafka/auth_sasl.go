package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

// SASL is not served yet (docs/kafka.md): a client set up for it learns so
// from the handshake instead of failing on a closed connection.
// SaslHandshake is advertised, as Kafka does on every listener, so that
// clients ask for their mechanism rather than send raw SASL bytes (kgo
// does without the key); the answer is UNSUPPORTED_SASL_MECHANISM with an
// empty list of enabled mechanisms, which each client reports as its
// mechanism not being supported by the broker. The connection stays open
// (the client closes it). SaslAuthenticate is not advertised: a client
// only sends it after a handshake that succeeded.

// saslHandshake answers a SaslHandshake: no mechanism is enabled.
func (s *Server) saslHandshake(rc *reqCtx, req *kmsg.SASLHandshakeRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = errUnsupportedSaslMechanism
	resp.SupportedMechanisms = []string{}
	rc.note(resp.ErrorCode)
	return resp
}
