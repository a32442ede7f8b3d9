package kafka

import (
	"context"
	"errors"
	"log/slog"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
)

// DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554),
// version 0: what kadm's DescribeUserSCRAMs and AlterUserSCRAMs and
// sarama's ClusterAdmin send, over the replicated SCRAM credentials
// (docs/security.md, "SCRAM credentials"). The answers follow Kafka's:
// per user, RESOURCE_NOT_FOUND for a user without credentials (or a
// deletion of one it does not hold), DUPLICATE_RESOURCE for a user named
// twice (or one mechanism of a user changed twice), UNSUPPORTED_SASL_MECHANISM
// for a mechanism other than SCRAM-SHA-256 (1) and SCRAM-SHA-512 (2), and
// UNACCEPTABLE_CREDENTIAL for an empty user, salt or salted password or
// an iteration count outside 4096 to 16384. An upsertion carries the
// salted password, never the password: the keys are derived from it
// here. Each change is one Raft entry; a user's changes are checked
// together first, so one refused leaves the user's others undone, but a
// failure between two entries (the leader lost) can leave some applied.

// The KIP-554 keys and their errors.
const (
	keyDescribeUserSCRAM int16 = 50
	keyAlterUserSCRAM    int16 = 51

	errResourceNotFound       int16 = 91
	errDuplicateResource      int16 = 92
	errUnacceptableCredential int16 = 93
)

// scramMechanism maps KIP-554's mechanism numbers.
func scramMechanism(m int8) (auth.SCRAMMechanism, bool) {
	switch m {
	case 1:
		return auth.SCRAMSHA256, true
	case 2:
		return auth.SCRAMSHA512, true
	}
	return "", false
}

// scramMechanismNumber is scramMechanism's inverse (0: unknown).
func scramMechanismNumber(m string) int8 {
	switch auth.SCRAMMechanism(m) {
	case auth.SCRAMSHA256:
		return 1
	case auth.SCRAMSHA512:
		return 2
	}
	return 0
}

// describeUserSCRAM answers a DescribeUserScramCredentials request: every
// user holding a credential when the request names none (null or empty).
func (s *Server) describeUserSCRAM(rc *reqCtx, req *kmsg.DescribeUserSCRAMCredentialsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if s.sasl.Credentials == nil || !rc.mayCluster() {
		if s.sasl.Credentials == nil {
			resp.ErrorCode = errUnsupportedVersion
		} else {
			resp.ErrorCode = errClusterAuthorizationFailed
		}
		rc.note(resp.ErrorCode)
		return resp
	}
	byUser := map[string][]backend.SCRAMInfo{}
	var users []string
	for _, c := range s.sasl.Credentials.SCRAMCredentials() {
		if _, ok := byUser[c.User]; !ok {
			users = append(users, c.User)
		}
		byUser[c.User] = append(byUser[c.User], c)
	}
	result := func(user string) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = user
		for _, c := range byUser[user] {
			ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			ci.Mechanism, ci.Iterations = scramMechanismNumber(c.Mechanism), int32(c.Iterations)
			r.CredentialInfos = append(r.CredentialInfos, ci)
		}
		return r
	}
	if len(req.Users) == 0 {
		for _, u := range users {
			resp.Results = append(resp.Results, result(u))
		}
		return resp
	}
	seen := map[string]int{}
	for _, u := range req.Users {
		seen[u.Name]++
	}
	for _, u := range req.Users {
		r := result(u.Name)
		switch {
		case seen[u.Name] > 1:
			r.CredentialInfos = nil
			r.ErrorCode, r.ErrorMessage = errDuplicateResource, kmsg.StringPtr("cannot describe the same user twice in one request")
			seen[u.Name] = -1 // answered once
		case seen[u.Name] < 0:
			continue
		case len(r.CredentialInfos) == 0:
			r.ErrorCode, r.ErrorMessage = errResourceNotFound, kmsg.StringPtr("attempt to describe a user credential that does not exist: "+u.Name)
		}
		rc.note(r.ErrorCode)
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// scramChange is one deletion or upsertion of a request.
type scramChange struct {
	mech   auth.SCRAMMechanism
	delete bool
	cred   auth.SCRAMCredential
	iters  int32
}

// alterUserSCRAM answers an AlterUserScramCredentials request, one result
// per user it names.
func (s *Server) alterUserSCRAM(ctx context.Context, rc *reqCtx, req *kmsg.AlterUserSCRAMCredentialsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var users []string
	changes := map[string][]scramChange{}
	codes := map[string]int16{}
	msgs := map[string]string{}
	refuse := func(user string, code int16, msg string) {
		if codes[user] == errNone {
			codes[user], msgs[user] = code, msg
		}
	}
	add := func(user string, mech int8, ch scramChange) {
		if _, ok := changes[user]; !ok {
			users = append(users, user)
			changes[user] = nil
		}
		m, ok := scramMechanism(mech)
		switch {
		case user == "":
			refuse(user, errUnacceptableCredential, "user name is empty")
			return
		case !ok:
			refuse(user, errUnsupportedSaslMechanism, "unknown SCRAM mechanism")
			return
		case slices.ContainsFunc(changes[user], func(c scramChange) bool { return c.mech == m }):
			refuse(user, errDuplicateResource, "a user's mechanism may be changed once per request")
		}
		ch.mech = m
		changes[user] = append(changes[user], ch)
	}
	for _, d := range req.Deletions {
		add(d.Name, d.Mechanism, scramChange{delete: true})
	}
	for _, u := range req.Upsertions {
		n := len(changes[u.Name])
		add(u.Name, u.Mechanism, scramChange{iters: u.Iterations})
		if len(changes[u.Name]) == n || codes[u.Name] != errNone {
			continue
		}
		ch := &changes[u.Name][n]
		switch {
		case u.Iterations < auth.MinSCRAMIterations || u.Iterations > auth.MaxSCRAMIterations:
			refuse(u.Name, errUnacceptableCredential, "iterations must be from 4096 to 16384")
			continue
		case len(u.Salt) == 0 || len(u.SaltedPassword) == 0:
			refuse(u.Name, errUnacceptableCredential, "empty salt or salted password")
			continue
		}
		c, err := auth.SCRAMCredentialFromSaltedPassword(ch.mech, u.Name, u.SaltedPassword, u.Salt, int(u.Iterations))
		if err != nil {
			refuse(u.Name, errUnacceptableCredential, err.Error())
			continue
		}
		ch.cred = c
	}
	leader := s.waitReady(ctx) && s.b.IsLeader()
	for _, user := range users {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = user
		switch {
		case s.sasl.Credentials == nil:
			refuse(user, errUnsupportedVersion, "SCRAM credentials are not served")
		case !rc.mayCluster():
			refuse(user, errClusterAuthorizationFailed, "")
		case !leader:
			refuse(user, errNotController, "")
		}
		if codes[user] == errNone {
			for _, ch := range changes[user] {
				var err error
				if ch.delete {
					_, err = s.sasl.Credentials.DeleteSCRAMCredential(ctx, user, ch.mech)
				} else {
					_, err = s.sasl.Credentials.SetSCRAMCredential(ctx, ch.cred, rc.c.principal.String())
				}
				if err != nil {
					code := codeFor(err, opAdmin)
					if errors.Is(err, auth.ErrInvalidSCRAM) {
						code = errUnacceptableCredential
					}
					refuse(user, code, err.Error())
					break
				}
			}
		}
		r.ErrorCode = codes[user]
		if r.ErrorCode != errNone && msgs[user] != "" {
			r.ErrorMessage = kmsg.StringPtr(msgs[user])
		}
		rc.note(r.ErrorCode)
		resp.Results = append(resp.Results, r)
		var summary []slog.Attr
		summary = append(summary, slog.String("user", user))
		for _, ch := range changes[user] {
			if ch.delete {
				summary = append(summary, slog.String("delete", string(ch.mech)))
			} else {
				summary = append(summary, slog.Group("upsert", slog.String("mechanism", string(ch.mech)), slog.Int("iterations", int(ch.iters))))
			}
		}
		rc.audit(summary, r.ErrorCode, msgs[user])
	}
	return resp
}
