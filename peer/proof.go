package peer

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// A call between nodes of a cluster without peer TLS proves the cluster
// secret (docs/security.md, "Peers") in ProofHeader:
//
//	v1 <node id> <unix ms> <nonce, 32 hex digits> <HMAC-SHA256, hex>
//
// the HMAC under the secret of the method, the request URI, the node id,
// the time and the nonce. It is good for that one request and for
// ProofWindow either side of its time; within the window the same
// request can be replayed by whoever saw it (on loopback, root).

const (
	// ProofHeader carries a peer call's proof of the cluster secret.
	ProofHeader = "Logd-Peer-Proof"
	// ProofWindow is how far a proof's time may be from the receiver's
	// clock.
	ProofWindow = time.Minute
)

// ErrProof is a peer call without a valid proof of the cluster secret.
var ErrProof = errors.New("no valid proof of the cluster secret")

// proofMAC is the HMAC of a proof's fields.
func proofMAC(secret []byte, method, uri, node, ms, nonce string) string {
	m := hmac.New(sha256.New, secret)
	for _, f := range []string{"logd peer call v1", method, uri, node, ms, nonce} {
		m.Write([]byte(f))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// SignRequest sets r's ProofHeader: node proves secret for r at now.
func SignRequest(r *http.Request, node string, secret []byte, now time.Time) {
	nonce := make([]byte, 16)
	rand.Read(nonce)
	ms := strconv.FormatInt(now.UnixMilli(), 10)
	n := hex.EncodeToString(nonce)
	r.Header.Set(ProofHeader, strings.Join([]string{"v1", node, ms, n, proofMAC(secret, r.Method, r.URL.RequestURI(), node, ms, n)}, " "))
}

// VerifyRequest checks r's ProofHeader against secret at now and returns
// the node id it proves; ErrProof when it is missing, malformed, out of
// the window or wrong.
func VerifyRequest(r *http.Request, secret []byte, now time.Time) (string, error) {
	h := r.Header.Get(ProofHeader)
	if h == "" {
		return "", fmt.Errorf("%w: no %s header", ErrProof, ProofHeader)
	}
	f := strings.Split(h, " ")
	if len(f) != 5 || f[0] != "v1" {
		return "", fmt.Errorf("%w: a malformed %s header", ErrProof, ProofHeader)
	}
	node, ms, nonce, mac := f[1], f[2], f[3], f[4]
	t, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return "", fmt.Errorf("%w: a malformed time", ErrProof)
	}
	if d := now.Sub(time.UnixMilli(t)); d > ProofWindow || d < -ProofWindow {
		return "", fmt.Errorf("%w: the proof's time is %v from this node's clock (at most %v)", ErrProof, d.Round(time.Second), ProofWindow)
	}
	if !hmac.Equal([]byte(mac), []byte(proofMAC(secret, r.Method, r.URL.RequestURI(), node, ms, nonce))) {
		return "", fmt.Errorf("%w: node %q proved another secret, or the request changed", ErrProof, node)
	}
	return node, nil
}
