package server_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/internal/testcerts"
	"github.com/logd-dev/logd/replication"
	"github.com/logd-dev/logd/replication/catchup"
	"github.com/logd-dev/logd/server"
)

// peerEnv is an authEnv whose node serves node-to-node calls on a peer
// listener of its own (Options.PeerListener), under mutual TLS with the
// cluster CA as cmd/logd serves it.
type peerEnv struct {
	*authEnv
	peer *httptest.Server
}

func newPeerEnv(t *testing.T, ctx context.Context, ca *testcerts.CA, separate bool) *peerEnv {
	t.Helper()
	e := newAuthEnv(t, ctx, envConfig{ca: ca, mod: func(o *server.Options) {
		o.PeerListener = separate
		o.Segments = o.Backend.(*replication.Backend).SegmentHandler()
	}})
	pe := &peerEnv{authEnv: e}
	if separate {
		pe.peer = httptest.NewUnstartedServer(e.srv.PeerHandler())
		pe.peer.EnableHTTP2 = true
		pe.peer.TLS = ca.ServerConfig(ca.Node(t, "n1"))
		pe.peer.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes
		pe.peer.StartTLS()
		t.Cleanup(pe.peer.Close)
	}
	return pe
}

// get answers a GET of path at url, over TLS presenting cert, with its
// status code; an error when the handshake fails.
func (e *peerEnv) get(url, path string, cert tls.Certificate) (int, error) {
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: e.ca.ClientConfig(cert)}, Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(url + path)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// peerClient calls the peer listener as tlsClient calls the client port.
func (e *peerEnv) peerClient(cert tls.Certificate, header http.Header) logdv1connect.LogServiceClient {
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: e.ca.ClientConfig(cert), ForceAttemptHTTP2: true}}
	e.t.Cleanup(hc.CloseIdleConnections)
	return logdv1connect.NewLogServiceClient(hc, e.peer.URL, connect.WithInterceptors(withHeader(header)))
}

// TestPeerListener: with a peer listener, the client port serves no
// /internal/ path and believes no forwarding header, even from a member's
// node certificate: the call is that certificate's own. The peer listener
// serves segments, forwarded calls, Join and Status to nodes, 404 to any
// other call, and 403 to a certificate of the cluster CA that is not a
// node's. Without a peer listener the client port serves both, as before.
func TestPeerListener(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ca := testcerts.NewCA(t, "cluster")
	n1, bob := ca.Node(t, "n1"), ca.Client(t, "bob")
	fwd := http.Header{server.ForwardedHeader: {"n1"}, server.ForwardedPrincipalHeader: {"certificate User:alice"}, server.ForwardedForHeader: {"10.1.2.3:4567"}}
	// A segment request without its parameters: the segment endpoint
	// answers 400, a port without it 404.
	const segment = catchup.SegmentPathPrefix + "meta"

	t.Run("without a peer listener", func(t *testing.T) {
		e := newPeerEnv(t, ctx, ca, false)
		if code, err := e.get(e.url, segment, n1); err != nil || code != http.StatusBadRequest {
			t.Errorf("client port, segment endpoint: %d, %v; want 400 from the endpoint", code, err)
		}
		if got, err := whoami(ctx, e.tlsClient(&n1, "", fwd)); err != nil || got != "User:alice certificate" {
			t.Errorf("client port, forwarded by member n1: %q, %v; want the forwarded principal", got, err)
		}
	})

	e := newPeerEnv(t, ctx, ca, true)
	// The client port.
	if code, err := e.get(e.url, segment, n1); err != nil || code != http.StatusNotFound {
		t.Errorf("client port, segment endpoint: %d, %v; want 404", code, err)
	}
	if got, err := whoami(ctx, e.tlsClient(&n1, "", fwd)); err != nil || got != "Node:n1 certificate" {
		t.Errorf("client port, forwarded by member n1: %q, %v; want n1's own principal (the headers dropped)", got, err)
	}
	if got, err := whoami(ctx, e.tlsClient(&bob, "", fwd)); err != nil || got != "User:bob certificate" {
		t.Errorf("client port, bob's certificate with forwarding headers: %q, %v", got, err)
	}
	if _, err := e.tlsClient(&n1, "", nil).Status(ctx, connect.NewRequest(&logdv1.StatusRequest{})); err != nil {
		t.Errorf("client port, Status: %v", err)
	}

	// The peer listener.
	if code, err := e.get(e.peer.URL, segment, n1); err != nil || code != http.StatusBadRequest {
		t.Errorf("peer port, segment endpoint: %d, %v; want 400 from the endpoint", code, err)
	}
	if got, err := whoami(ctx, e.peerClient(n1, fwd)); err != nil || got != "User:alice certificate" {
		t.Errorf("peer port, forwarded by member n1: %q, %v; want the forwarded principal", got, err)
	}
	if _, err := e.peerClient(n1, nil).Status(ctx, connect.NewRequest(&logdv1.StatusRequest{})); err != nil {
		t.Errorf("peer port, Status from a node: %v", err)
	}
	if got, err := whoami(ctx, e.peerClient(n1, nil)); connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Errorf("peer port, a call not forwarded: %q, %v; want 404 (UNIMPLEMENTED)", got, err)
	}
	if _, err := e.peerClient(bob, nil).Status(ctx, connect.NewRequest(&logdv1.StatusRequest{})); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("peer port, Status from a client certificate of the cluster CA: %v; want 403 (PERMISSION_DENIED)", err)
	}
	if code, err := e.get(e.peer.URL, segment, bob); err != nil || code != http.StatusForbidden {
		t.Errorf("peer port, segment endpoint for a client certificate: %d, %v; want 403", code, err)
	}
	if _, err := e.get(e.peer.URL, segment, tls.Certificate{}); err == nil {
		t.Error("peer port: a caller without a certificate completed the handshake")
	}
}

// callBackend is a follower whose leader registered a peer address (call)
// beside its API address (api).
type callBackend struct {
	server.Backend
	api, call string
}

func (b *callBackend) NodeID() string                      { return "f" }
func (b *callBackend) APIAddress() string                  { return "self:1" }
func (b *callBackend) Failed() error                       { return nil }
func (b *callBackend) Ready() bool                         { return true }
func (b *callBackend) IsLeader() bool                      { return false }
func (b *callBackend) MemberAPIAddresses() []string        { return nil }
func (b *callBackend) LeaderAPIAddress() (string, string)  { return b.api, "l" }
func (b *callBackend) LeaderCallAddress() (string, string) { return b.call, "l" }

// TestForwardToPeerAddress: a follower forwards a write to the leader's
// call address (its peer listener), never to its client API address, and
// a client it cannot forward for is told the leader's client API address.
func TestForwardToPeerAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leader, produced := standInLeader(t)
	api := closedAddr(t)
	newFollower := func(call string) logdv1connect.LogServiceClient {
		srv := httptest.NewServer(server.New(server.Options{Backend: &callBackend{api: api, call: call},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler())
		t.Cleanup(srv.Close)
		return logdv1connect.NewLogServiceClient(srv.Client(), srv.URL)
	}
	produce := connect.NewRequest(&logdv1.ProduceRequest{Topic: "t", Records: []*logdv1.Record{{Value: []byte("v")}}})
	tctx, tcancel := context.WithTimeout(ctx, 3*time.Second)
	defer tcancel()
	if _, err := newFollower(leader).Produce(tctx, produce); err != nil || produced.Load() != 1 {
		t.Fatalf("forwarded to the leader's peer address: %v, %d produced", err, produced.Load())
	}
	_, err := newFollower(closedAddr(t)).Produce(tctx, produce)
	var ce *connect.Error
	if connect.CodeOf(err) != connect.CodeUnavailable || !errors.As(err, &ce) || leaderHint(ce) != api {
		t.Errorf("leader's peer address unreachable: %v; want NOT_LEADER naming its API address %s", err, api)
	}
}

// leaderHint is the leader address an error's ErrorInfo names.
func leaderHint(ce *connect.Error) string {
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if info, ok := v.(*logdv1.ErrorInfo); ok {
				return info.LeaderAddress
			}
		}
	}
	return ""
}
