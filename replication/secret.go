package replication

import (
	"bytes"
	"context"
	"crypto/rand"
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
	"github.com/logd-dev/logd/replication/transport"
)

// The cluster secret: 32 random bytes every member holds, which the Raft
// port proves and requires on every session (replication/transport,
// docs/security.md "Peers"), so a process that reaches the port without
// it can neither send Raft RPCs nor pose as a peer. A node keeps it in
// DataDir/cluster-secret (hex, mode 0600), never in the Raft log,
// snapshots or backups. It is made when a node bootstraps a cluster, or
// when a node that holds none starts as the only member of its
// configuration (a single-node data dir of an earlier build); a joining
// node asks for it in a Join call (AskSecret) before it joins, a call
// the front end answers only to a caller allowed to join (peer TLS: the
// node's own certificate). A cluster of several nodes of an earlier build
// holds none and runs as before until it gets one.

const (
	// secretFile is the cluster secret's file in the data dir.
	secretFile = "cluster-secret"
	// secretLen is the cluster secret's length in bytes.
	secretLen = 32
)

// ErrClusterSecret is a cluster secret file that is not one, or one that
// differs from the secret the node was given.
var ErrClusterSecret = errors.New("cluster secret")

// AskSecret asks the member whose client API is at member for the cluster
// secret (a Join call that asks only for it, backend.JoinRequest), made
// as AskJoin's calls are. A member of an earlier build takes the call for
// a join: then joined is true and leaderID names the leader that added
// the node. A secret of nil from a member that answered is a cluster
// that holds none.
type AskSecret func(ctx context.Context, member string, req backend.JoinRequest) (secret []byte, leaderID string, joined bool, err error)

// readSecret reads the cluster secret in dir; nil when there is none.
func readSecret(dir string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, secretFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the cluster secret: %w", err)
	}
	s, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(s) != secretLen {
		return nil, fmt.Errorf("%w: %s holds no %d-byte hex secret", ErrClusterSecret, filepath.Join(dir, secretFile), secretLen)
	}
	return s, nil
}

// writeSecret stores secret in dir, durably: a temporary file synced and
// renamed, and the directory synced.
func writeSecret(dir string, secret []byte) error {
	path := filepath.Join(dir, secretFile)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("write the cluster secret: %w", err)
	}
	_, err = f.WriteString(hex.EncodeToString(secret) + "\n")
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

// loadSecret returns the node's cluster secret at start: the data dir's,
// or Config.ClusterSecret's, which it stores when the data dir holds
// none; nil when neither has one.
func loadSecret(cfg Config) ([]byte, error) {
	have, err := readSecret(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.ClusterSecret == nil:
		return have, nil
	case len(cfg.ClusterSecret) != secretLen:
		return nil, fmt.Errorf("%w: the secret given has %d bytes, not %d", ErrClusterSecret, len(cfg.ClusterSecret), secretLen)
	case have == nil:
		return cfg.ClusterSecret, writeSecret(cfg.DataDir, cfg.ClusterSecret)
	case !bytes.Equal(have, cfg.ClusterSecret):
		return nil, fmt.Errorf("%w: the secret given differs from the one in %s", ErrClusterSecret, filepath.Join(cfg.DataDir, secretFile))
	}
	return have, nil
}

// ClusterSecret returns the cluster secret this node's Raft port proves,
// nil for none (an in-memory node, or a cluster of an earlier build). The
// front end hands it only to a caller allowed to join.
func (n *Node) ClusterSecret() []byte {
	if n.stores.port == nil {
		return nil
	}
	return bytes.Clone(n.stores.port.ClusterSecret())
}

// setSecret stores secret and has the Raft port prove it.
func (n *Node) setSecret(secret []byte) error {
	n.secretMu.Lock()
	defer n.secretMu.Unlock()
	if err := writeSecret(n.cfg.DataDir, secret); err != nil {
		return err
	}
	n.stores.port.SetSecret(secret)
	return nil
}

// ensureSecret makes a cluster secret when the node holds none and is the
// only member of its configuration (it bootstrapped, or its data dir is a
// single node's of an earlier build): no other node can need the old
// framing then.
func (n *Node) ensureSecret() error {
	if n.stores.port == nil || n.ClusterSecret() != nil {
		return nil
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("read the raft configuration: %w", err)
	}
	servers := f.Configuration().Servers
	if len(servers) != 1 || string(servers[0].ID) != n.cfg.NodeID {
		if len(servers) > 1 {
			n.cfg.Logger.Warn("this cluster has no cluster secret (its nodes run an earlier build's framing): the Raft port admits any peer that reaches it; see docs/security.md, Peers")
		}
		return nil
	}
	secret := make([]byte, secretLen)
	rand.Read(secret)
	if err := n.setSecret(secret); err != nil {
		return err
	}
	n.cfg.Logger.Info("made the cluster secret", "file", filepath.Join(n.cfg.DataDir, secretFile))
	return nil
}

// fetchSecret asks member for the cluster secret through ask, retrying
// as JoinCluster does, when this node holds none; it returns the leader's
// id and true when a member of an earlier build took the call for a join.
func (n *Node) fetchSecret(ctx context.Context, member string, ask AskSecret) (string, bool, error) {
	if n.stores.port == nil || ask == nil || n.ClusterSecret() != nil {
		return "", false, nil
	}
	req := n.joinRequest()
	req.SecretOnly = true
	var (
		secret []byte
		joined bool
	)
	leader, err := joinLoop(ctx, n.cfg.Logger, member, req, func(ctx context.Context, member string, req backend.JoinRequest) (string, error) {
		s, leader, j, err := ask(ctx, member, req)
		secret, joined = s, j
		return leader, err
	}, joinAttemptTimeout, joinRetryInterval)
	if err != nil {
		return "", false, err
	}
	if joined {
		return leader, true, nil
	}
	if secret == nil {
		return "", false, nil
	}
	if len(secret) != secretLen {
		return "", false, fmt.Errorf("%w: %s answered a secret of %d bytes", ErrClusterSecret, member, len(secret))
	}
	if err := n.setSecret(secret); err != nil {
		return "", false, err
	}
	n.cfg.Logger.Info("received the cluster secret", "via", member)
	return "", false, nil
}

// signPeerCalls has sc prove the cluster secret that port holds on each
// request, without peer TLS (under it, the node certificate proves the
// node), unless sc signs already.
func signPeerCalls(sc *catchup.SegmentClient, port *transport.Port, cfg Config) {
	if sc == nil || port == nil || sc.Sign != nil || cfg.PeerTLS != nil {
		return
	}
	sc.Sign = func(r *http.Request) {
		if s := port.ClusterSecret(); s != nil {
			peer.SignRequest(r, cfg.NodeID, s, time.Now())
		}
	}
}
