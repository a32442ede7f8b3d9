package server

import (
	"context"
	"crypto/rand"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
)

// SCRAM credentials (docs/security.md, "SCRAM credentials"): the Kafka
// listener's SASL/SCRAM and PLAIN check them; these procedures manage
// them, as the listener's KIP-554 keys do.

// SetScramCredential derives a user's credential from a password (a
// fresh salt, the iterations asked for) and stores it, replacing the
// user's credential of that mechanism.
func (s *Server) SetScramCredential(ctx context.Context, req *connect.Request[logdv1.SetScramCredentialRequest]) (*connect.Response[logdv1.SetScramCredentialResponse], error) {
	m, err := scramTarget(req.Msg.User, req.Msg.Mechanism)
	if err != nil {
		return nil, err
	}
	iters := int(req.Msg.Iterations)
	if iters == 0 {
		iters = auth.MinSCRAMIterations
	}
	c, err := auth.NewSCRAMCredential(m, req.Msg.User, req.Msg.Password, iters, rand.Reader)
	if err != nil {
		return nil, errInvalid("%v", err)
	}
	info, err := s.sec.SetSCRAMCredential(ctx, c, authFrom(ctx).principal.String())
	if err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&logdv1.SetScramCredentialResponse{Info: scramInfoProto(info)}), nil
}

// ListScramCredentials lists the credentials, those of one user if the
// request names one.
func (s *Server) ListScramCredentials(_ context.Context, req *connect.Request[logdv1.ListScramCredentialsRequest]) (*connect.Response[logdv1.ListScramCredentialsResponse], error) {
	resp := &logdv1.ListScramCredentialsResponse{}
	for _, c := range s.sec.SCRAMCredentials() {
		if req.Msg.User == "" || c.User == req.Msg.User {
			resp.Credentials = append(resp.Credentials, scramInfoProto(c))
		}
	}
	return connect.NewResponse(resp), nil
}

// DeleteScramCredential deletes a user's credential of one mechanism.
func (s *Server) DeleteScramCredential(ctx context.Context, req *connect.Request[logdv1.DeleteScramCredentialRequest]) (*connect.Response[logdv1.DeleteScramCredentialResponse], error) {
	m, err := scramTarget(req.Msg.User, req.Msg.Mechanism)
	if err != nil {
		return nil, err
	}
	info, err := s.sec.DeleteSCRAMCredential(ctx, req.Msg.User, m)
	if err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&logdv1.DeleteScramCredentialResponse{Info: scramInfoProto(info)}), nil
}

// scramTarget checks a request's user and mechanism (INVALID_ARGUMENT)
// and returns the mechanism.
func scramTarget(user, mechanism string) (auth.SCRAMMechanism, error) {
	m, err := auth.ParseSCRAMMechanism(mechanism)
	if err != nil {
		return "", errInvalid("%v", err)
	}
	if err := auth.ValidName(user); err != nil {
		return "", errInvalid("user %q: %v", user, err)
	}
	return m, nil
}

func scramInfoProto(c backend.SCRAMInfo) *logdv1.ScramCredentialInfo {
	return &logdv1.ScramCredentialInfo{User: c.User, Mechanism: c.Mechanism, Iterations: int32(c.Iterations), SetBy: c.SetBy, SetMs: c.SetMs}
}
