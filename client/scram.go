package client

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// SCRAMCredential describes a user's SCRAM credential for the Kafka
// listener's SASL (docs/security.md, "SCRAM credentials"); never its salt
// or keys.
type SCRAMCredential struct {
	User string `json:"user"`
	// Mechanism is "SCRAM-SHA-256" or "SCRAM-SHA-512".
	Mechanism  string `json:"mechanism"`
	Iterations int    `json:"iterations"`
	// SetBy is the principal that set it, Set when.
	SetBy string    `json:"set_by"`
	Set   time.Time `json:"set"`
}

func scramFromProto(m *logdv1.ScramCredentialInfo) SCRAMCredential {
	return SCRAMCredential{User: m.GetUser(), Mechanism: m.GetMechanism(), Iterations: int(m.GetIterations()),
		SetBy: m.GetSetBy(), Set: time.UnixMilli(m.GetSetMs()).UTC()}
}

// SetSCRAMCredential sets user's credential for mechanism
// ("SCRAM-SHA-256" or "SCRAM-SHA-512") from password, with iterations
// (4096 to 16384; 0 is 4096), replacing the one the user held. The node
// salts and hashes the password; the cluster keeps no password. Setting
// it again is harmless, so it is retried like a read.
func (c *Client) SetSCRAMCredential(ctx context.Context, user, mechanism, password string, iterations int) (SCRAMCredential, error) {
	var out SCRAMCredential
	err := c.do(ctx, "SetScramCredential", retryAny, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.SetScramCredential(ctx, connect.NewRequest(&logdv1.SetScramCredentialRequest{
			User: user, Mechanism: mechanism, Password: password, Iterations: int32(iterations)}))
		if err != nil {
			return fromRPC(err)
		}
		out = scramFromProto(resp.Msg.GetInfo())
		return nil
	})
	if err != nil {
		return SCRAMCredential{}, fmt.Errorf("set %s credential of %q: %w", mechanism, user, err)
	}
	return out, nil
}

// ListSCRAMCredentials lists the credentials of user, or every one when
// user is empty, sorted by user then mechanism.
func (c *Client) ListSCRAMCredentials(ctx context.Context, user string) ([]SCRAMCredential, error) {
	var out []SCRAMCredential
	err := c.do(ctx, "ListScramCredentials", retryAny, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.ListScramCredentials(ctx, connect.NewRequest(&logdv1.ListScramCredentialsRequest{User: user}))
		if err != nil {
			return fromRPC(err)
		}
		out = make([]SCRAMCredential, 0, len(resp.Msg.GetCredentials()))
		for _, m := range resp.Msg.GetCredentials() {
			out = append(out, scramFromProto(m))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list SCRAM credentials: %w", err)
	}
	return out, nil
}

// DeleteSCRAMCredential deletes user's credential for mechanism and
// returns what it was; ErrUnknownSCRAMCredential when the user holds
// none. It is retried only when nothing can have been written.
func (c *Client) DeleteSCRAMCredential(ctx context.Context, user, mechanism string) (SCRAMCredential, error) {
	var out SCRAMCredential
	err := c.do(ctx, "DeleteScramCredential", retryUnwritten, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.DeleteScramCredential(ctx, connect.NewRequest(&logdv1.DeleteScramCredentialRequest{User: user, Mechanism: mechanism}))
		if err != nil {
			return fromRPC(err)
		}
		out = scramFromProto(resp.Msg.GetInfo())
		return nil
	})
	if err != nil {
		return SCRAMCredential{}, fmt.Errorf("delete %s credential of %q: %w", mechanism, user, err)
	}
	return out, nil
}
