package replication

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/peer"
	"github.com/logd-dev/logd/replication/catchup"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/transport"
)

// The cluster secret: 32 random bytes every member holds, which the Raft
// port proves and requires on every session (replication/transport) and
// calls between nodes without peer TLS prove (peer.SignRequest), so a
// process that reaches the ports without it can neither send Raft RPCs,
// pose as a peer nor read segments (docs/security.md, "Peers"). A node
// keeps it in DataDir/cluster-secret (hex, mode 0600, and the word
// "required" once it requires it), never in the Raft log, snapshots or
// backups; the node registry holds a fingerprint of it per node (a hash,
// never the secret).
//
// Where it comes from:
//
//   - A node that bootstraps a cluster, or that starts as the only member
//     of its configuration without one (a single node of an earlier
//     build), makes it, and requires it at once.
//   - A joining node asks for it in a Join call with SecretOnly before it
//     joins (Config.AskSecret), a call the front end answers only to a
//     caller allowed to join (peer TLS: the node's own certificate).
//   - A cluster of several nodes of an earlier build gets it once every
//     member runs a build at fsm.SessionLevel (handOverSecret): the
//     leader makes one, each follower asks the leader for it, and every
//     member registers its fingerprint; meanwhile each proves it to the
//     peers that can check it and takes unproven ones too. Once every
//     member of the configuration registered the same fingerprint, each
//     node requires the secret from then on.
//
// Nodes at a build level below fsm.SessionLevel (Config.FeatureLevel, as
// tests play an earlier build) neither make, ask for nor hand over one.

const (
	// secretFile is the cluster secret's file in the data dir.
	secretFile = "cluster-secret"
	// secretLen is the cluster secret's length in bytes.
	secretLen = 32
	// secretRequired marks a secret file whose node requires the secret.
	secretRequired = "required"
	// handoverMinBackoff and handoverMaxBackoff bound the pause after a
	// failed ask for the secret during a hand-over.
	handoverMinBackoff = 250 * time.Millisecond
	handoverMaxBackoff = 10 * time.Second
)

// ErrClusterSecret is a cluster secret file that is not one, or one that
// differs from the secret the node was given.
var ErrClusterSecret = errors.New("cluster secret")

// SecretAnswer is a member's answer to a Join call with SecretOnly.
type SecretAnswer struct {
	// Secret is the cluster secret; nil for a cluster that holds none.
	Secret []byte
	// Required: the member requires it already.
	Required bool
	// LeaderID names the node that answered (or, with Joined, the
	// leader that added this node).
	LeaderID string
	// Joined: a member of an earlier build took the call for a join.
	Joined bool
}

// AskSecret asks the member whose client API (or peer address) is at
// member for the cluster secret (a Join call with
// backend.JoinRequest.SecretOnly), made as AskJoin's calls are.
type AskSecret func(ctx context.Context, member string, req backend.JoinRequest) (SecretAnswer, error)

// fingerprint names secret in the node registry: a hash, from which the
// secret cannot be had; "" for none.
func fingerprint(secret []byte) string {
	if secret == nil {
		return ""
	}
	h := sha256.Sum256(append([]byte("logd cluster secret fingerprint\x00"), secret...))
	return hex.EncodeToString(h[:8])
}

// readSecret reads the cluster secret in dir, and whether the node
// requires it; nil when there is none.
func readSecret(dir string) ([]byte, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, secretFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read the cluster secret: %w", err)
	}
	lines := strings.Fields(string(b))
	var s []byte
	if len(lines) > 0 {
		s, err = hex.DecodeString(lines[0])
	}
	if len(lines) == 0 || len(lines) > 2 || err != nil || len(s) != secretLen || len(lines) == 2 && lines[1] != secretRequired {
		return nil, false, fmt.Errorf("%w: %s holds no %d-byte hex secret", ErrClusterSecret, filepath.Join(dir, secretFile), secretLen)
	}
	return s, len(lines) == 2, nil
}

// writeSecret stores secret in dir, durably: a temporary file synced and
// renamed, and the directory synced.
func writeSecret(dir string, secret []byte, required bool) error {
	path := filepath.Join(dir, secretFile)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("write the cluster secret: %w", err)
	}
	text := hex.EncodeToString(secret) + "\n"
	if required {
		text += secretRequired + "\n"
	}
	_, err = f.WriteString(text)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write the cluster secret: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write the cluster secret: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("write the cluster secret: %w", err)
	}
	return nil
}

// loadSecret returns the node's cluster secret at start, and whether it
// requires it: the data dir's, or Config.ClusterSecret's (required),
// which it stores when the data dir holds none; nil when neither has
// one.
func loadSecret(cfg Config) ([]byte, bool, error) {
	have, required, err := readSecret(cfg.DataDir)
	if err != nil {
		return nil, false, err
	}
	switch {
	case cfg.ClusterSecret == nil:
		return have, required, nil
	case len(cfg.ClusterSecret) != secretLen:
		return nil, false, fmt.Errorf("%w: the secret given has %d bytes, not %d", ErrClusterSecret, len(cfg.ClusterSecret), secretLen)
	case have == nil:
		return cfg.ClusterSecret, true, writeSecret(cfg.DataDir, cfg.ClusterSecret, true)
	case !bytes.Equal(have, cfg.ClusterSecret):
		return nil, false, fmt.Errorf("%w: the secret given differs from the one in %s", ErrClusterSecret, filepath.Join(cfg.DataDir, secretFile))
	}
	return have, true, nil
}

// ClusterSecret returns the cluster secret this node's Raft port proves,
// nil for none (an in-memory node, or a cluster of an earlier build not
// handed one yet), and whether the node requires it. The front end hands
// it only to a caller allowed to join.
func (n *Node) ClusterSecret() ([]byte, bool) {
	if n.stores.port == nil {
		return nil, false
	}
	s, required := n.stores.port.ClusterSecret()
	return bytes.Clone(s), required
}

// clusterSecretKey is ClusterSecret's secret alone.
func (n *Node) clusterSecretKey() []byte {
	s, _ := n.ClusterSecret()
	return s
}

// setSecret stores secret and has the Raft port prove it, and require it
// if required.
func (n *Node) setSecret(secret []byte, required bool) error {
	n.secretMu.Lock()
	defer n.secretMu.Unlock()
	if err := writeSecret(n.cfg.DataDir, secret, required); err != nil {
		return err
	}
	n.stores.port.SetSecret(secret, required)
	return nil
}

// secretAware reports whether this node takes part in the cluster
// secret: it has a Raft port and runs at fsm.SessionLevel or above.
func (n *Node) secretAware() bool {
	return n.stores.port != nil && n.buildLevel() >= fsm.SessionLevel
}

// ensureSecret makes a cluster secret, required at once, when the node
// holds none and is the only member of its configuration (it
// bootstrapped, or its data dir is a single node's of an earlier build):
// no other node can need an unproven session then.
func (n *Node) ensureSecret() error {
	if !n.secretAware() || n.clusterSecretKey() != nil {
		return nil
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("read the raft configuration: %w", err)
	}
	servers := f.Configuration().Servers
	if len(servers) != 1 || string(servers[0].ID) != n.cfg.NodeID {
		if len(servers) > 1 {
			n.cfg.Logger.Warn(fmt.Sprintf("this cluster has no cluster secret yet (it ran an earlier build): until every member runs a build at feature level %d or above, "+
				"which hands it one, the Raft port admits any peer that reaches it; see docs/security.md, Peers", fsm.SessionLevel))
		}
		return nil
	}
	if err := n.setSecret(newSecret(), true); err != nil {
		return err
	}
	n.cfg.Logger.Info("made the cluster secret", "file", filepath.Join(n.cfg.DataDir, secretFile))
	return nil
}

// newSecret returns a new random cluster secret.
func newSecret() []byte {
	s := make([]byte, secretLen)
	rand.Read(s)
	return s
}

// fetchSecret asks member for the cluster secret through ask, retrying
// as JoinCluster does, when this node holds none; it returns the leader's
// id and true when a member of an earlier build took the call for a join.
func (n *Node) fetchSecret(ctx context.Context, member string, ask AskSecret) (string, bool, error) {
	if !n.secretAware() || ask == nil || n.clusterSecretKey() != nil {
		return "", false, nil
	}
	req := n.joinRequest()
	req.SecretOnly = true
	var answer SecretAnswer
	_, err := joinLoop(ctx, n.cfg.Logger, member, req, func(ctx context.Context, member string, req backend.JoinRequest) (string, error) {
		a, err := ask(ctx, member, req)
		answer = a
		return a.LeaderID, err
	}, joinAttemptTimeout, joinRetryInterval)
	switch {
	case err != nil:
		return "", false, err
	case answer.Joined:
		return answer.LeaderID, true, nil
	case answer.Secret == nil:
		return "", false, nil
	case len(answer.Secret) != secretLen:
		return "", false, fmt.Errorf("%w: %s answered a secret of %d bytes", ErrClusterSecret, member, len(answer.Secret))
	}
	if err := n.setSecret(answer.Secret, answer.Required); err != nil {
		return "", false, err
	}
	n.cfg.Logger.Info("received the cluster secret", "via", member, "required", answer.Required)
	return "", false, nil
}

// handover is the state of handOverSecret's asks.
type handover struct {
	next    time.Time
	backoff time.Duration
}

// handOverSecret moves a cluster of an earlier build onto a cluster
// secret, one step per call, once every member runs a build at
// fsm.SessionLevel: the leader makes one if it holds none; a follower
// whose secret is not the one the leader registered asks the leader for
// it; and once every member of the configuration registered the
// fingerprint of the secret this node holds, the node requires it. The
// registration loop calls it; a node that requires its secret does
// nothing.
func (n *Node) handOverSecret(ctx context.Context, h *handover) {
	if !n.secretAware() || !n.ready.Load() {
		return
	}
	secret, required := n.ClusterSecret()
	if required {
		return
	}
	if level, err := n.featureLevel(); err != nil || level < fsm.SessionLevel {
		return
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	servers := f.Configuration().Servers
	_, leader := n.raft.LeaderWithID()
	switch {
	case leader == "":
		return
	case string(leader) == n.cfg.NodeID:
		if secret == nil {
			secret = newSecret()
			if err := n.setSecret(secret, false); err != nil {
				n.cfg.Logger.Error("make the cluster secret", "err", err)
				return
			}
			n.cfg.Logger.Info("made the cluster secret; handing it to the members", "file", filepath.Join(n.cfg.DataDir, secretFile))
		}
	default:
		lr, ok := n.fsm.Node(string(leader))
		if !ok || lr.SecretFingerprint == "" || lr.SecretFingerprint == fingerprint(secret) {
			break
		}
		if n.cfg.AskSecret == nil || time.Now().Before(h.next) {
			return
		}
		req := n.joinRequest()
		req.SecretOnly = true
		actx, cancel := context.WithTimeout(ctx, registerAttemptTimeout)
		a, err := n.cfg.AskSecret(actx, lr.CallAddress(), req)
		cancel()
		if err == nil && (a.Joined || fingerprint(a.Secret) != lr.SecretFingerprint) {
			err = fmt.Errorf("the leader answered another secret than the one it registered")
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			h.backoff = min(max(2*h.backoff, handoverMinBackoff), handoverMaxBackoff)
			h.next = time.Now().Add(h.backoff)
			n.cfg.Logger.Warn("ask the leader for the cluster secret; retrying", "leader", string(leader), "via", lr.CallAddress(), "retry_in", h.backoff, "err", err)
			return
		}
		h.backoff, h.next = 0, time.Time{}
		secret = a.Secret
		if err := n.setSecret(secret, false); err != nil {
			n.cfg.Logger.Error("store the cluster secret", "err", err)
			return
		}
		n.cfg.Logger.Info("received the cluster secret from the leader", "leader", string(leader))
	}
	if secret == nil {
		return
	}
	fp := fingerprint(secret)
	for _, s := range servers {
		if r, ok := n.fsm.Node(string(s.ID)); !ok || r.SecretFingerprint != fp {
			return
		}
	}
	if err := n.setSecret(secret, true); err != nil {
		n.cfg.Logger.Error("require the cluster secret", "err", err)
		return
	}
	n.cfg.Logger.Info("every member holds the cluster secret: the Raft port requires it from now on", "members", len(servers))
}

// signPeerCalls has sc prove the cluster secret that port holds on each
// request, without peer TLS (under it, the node certificate proves the
// node), unless sc signs already.
func signPeerCalls(sc *catchup.SegmentClient, port *transport.Port, cfg Config) {
	if sc == nil || port == nil || sc.Sign != nil || cfg.PeerTLS != nil {
		return
	}
	sc.Sign = func(r *http.Request) {
		if s, _ := port.ClusterSecret(); s != nil {
			peer.SignRequest(r, cfg.NodeID, s, time.Now())
		}
	}
}
