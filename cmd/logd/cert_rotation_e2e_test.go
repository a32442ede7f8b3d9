package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/internal/e2e"
)

// Certificate rotation under load (docs/security.md, "Reloading" and
// "Rotation"): a secure three-node cluster keeps serving a producer load
// while its certificate files are replaced, and loses nothing.

// rotatingTLS is a client's TLS that trusts a fixed set of CAs and
// presents whichever certificate the test made current: a client that
// was handed the new CA bundle first and its new certificate later.
type rotatingTLS struct {
	roots *x509.CertPool
	cert  atomic.Pointer[tls.Certificate]
}

func newRotatingTLS(t *testing.T, certFile, keyFile string, caFiles ...string) *rotatingTLS {
	t.Helper()
	r := &rotatingTLS{roots: x509.NewCertPool()}
	for _, f := range caFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !r.roots.AppendCertsFromPEM(b) {
			t.Fatalf("no certificate in %s", f)
		}
	}
	r.use(t, certFile, keyFile)
	return r
}

// use makes the certificate in certFile current for the next handshake.
func (r *rotatingTLS) use(t *testing.T, certFile, keyFile string) {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	r.cert.Store(&pair)
}

func (r *rotatingTLS) config() *tls.Config {
	return &tls.Config{
		RootCAs: r.roots,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return r.cert.Load(), nil
		},
		// Resumption is tried wherever the server allows it, so a
		// rotation must refuse resumed sessions too.
		ClientSessionCache: tls.NewLRUClientSessionCache(64),
	}
}

// transport is an HTTP transport over r that speaks HTTP/2 when the
// server offers it.
func (r *rotatingTLS) transport() *http.Transport {
	return &http.Transport{TLSClientConfig: r.config(), ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 64}
}

// replaceFile replaces name by a rename, as logd cert does.
func replaceFile(t *testing.T, name string, data []byte) {
	t.Helper()
	tmp := name + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, name); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// presented is the certificate the server at addr presents in a new
// handshake; nil when the handshake fails. The Raft port and the API
// both ask for a client certificate and close the connection without
// one, after the handshake that shows theirs.
func presented(addr string) *x509.Certificate {
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := tls.DialWithDialer(&d, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) // only looking
	if err != nil {
		return nil
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0]
}

// certFile parses the certificate in name.
func certFile(t *testing.T, name string) *x509.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair(readFile(t, name), readFile(t, strings.TrimSuffix(name, ".crt")+".key"))
	if err != nil {
		t.Fatal(err)
	}
	return pair.Leaf
}

// reloadWait bounds the wait for every node to apply new files: a poll
// of 200 ms or a SIGHUP, on a loaded machine.
const reloadWait = 30 * time.Second

// rotationRig is the cluster under rotation: its certificate directory,
// its nodes, and how each reloads.
type rotationRig struct {
	t   *testing.T
	dir string
	c   *e2e.Cluster
	// rpc is the TLS of the nodes' rpc clients and of the producers.
	rpc *rotatingTLS
}

// reload makes the nodes reload their files: n1 by SIGHUP, the others by
// their file watch.
func (r *rotationRig) reload() { r.c.Nodes[0].Signal(syscall.SIGHUP) }

// waitPresented waits until every node presents the certificate now in
// its files on both its API and its Raft port: both of its reloaders took
// the new files.
func (r *rotationRig) waitPresented(ctx context.Context) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, reloadWait)
	defer cancel()
	for _, nd := range r.c.Nodes {
		want := certFile(r.t, filepath.Join(r.dir, nd.ID+".crt"))
		for _, port := range []struct{ name, addr string }{{"API", nd.Listen}, {"Raft", nd.Raft}} {
			e2e.WaitFor(r.t, ctx, fmt.Sprintf("%s presents its new certificate on its %s port", nd.ID, port.name), func() bool {
				got := presented(port.addr)
				return got != nil && got.Equal(want)
			})
		}
	}
}

// transfer hands the leadership to another node, whose Raft then dials
// the others afresh, under the current material, and waits until the
// producers get acknowledgements again.
func (r *rotationRig) transfer(ctx context.Context, ps *e2e.Producers, acks int) {
	r.t.Helper()
	leader := r.c.Leader(ctx)
	var target *e2e.Node
	for _, nd := range r.c.Nodes {
		if nd != leader {
			target = nd
			break
		}
	}
	if _, err := leader.RPC.TransferLeadership(ctx, connect.NewRequest(&logdv1.TransferLeadershipRequest{NodeId: target.ID})); err != nil {
		r.t.Fatalf("transfer the leadership from %s to %s: %v", leader.ID, target.ID, err)
	}
	e2e.WaitFor(r.t, ctx, target.ID+" leads", func() bool {
		st, err := target.Status(ctx)
		return err == nil && st.State == "Leader" && st.Ready
	})
	ps.WaitAcks(r.t, ctx, "acknowledgements under the new leader "+target.ID, acks)
}

// TestClusterCertRotation: a secure three-node cluster (TLS on the API
// and between the nodes, --auth required) under a producer load has every
// node's certificate replaced by a new one of the same CA; n1 reloads on
// SIGHUP, n2 and n3 by their file watch. Every node then presents its new
// certificate on both ports, a leadership transfer makes the new leader's
// Raft dial the others under the new material, and no acknowledged record
// is lost. With LOGD_FAULT_LONG=1 the CA itself is rotated next, with more
// load: a bundle of the old and new CAs, then node and client certificates
// of the new CA, then the bundle of the new CA alone; after which a client
// and a node certificate of the old CA are refused at their next
// handshake, resumed or not, on every node's API and Raft port.
func TestClusterCertRotation(t *testing.T) {
	e2e.ParallelShort(t)
	long := e2e.FaultLong()
	dir, next := t.TempDir(), t.TempDir()
	ids := []string{"n1", "n2", "n3"}
	issueNow(t, "ca", "--dir", dir)
	for _, id := range ids {
		issueNow(t, "node", "--dir", dir, "--id", id, "--hosts", "127.0.0.1")
	}
	issueNow(t, "client", "--dir", dir, "--name", "admin")
	caFiles := []string{filepath.Join(dir, "ca.crt")}
	if long {
		// The new CA, and its admin certificate, exist before the
		// rotation starts: the clients trust it from the start.
		issueNow(t, "ca", "--dir", next)
		issueNow(t, "client", "--dir", next, "--name", "admin")
		caFiles = append(caFiles, filepath.Join(next, "ca.crt"))
	}

	rig := &rotationRig{t: t, dir: dir, c: &e2e.Cluster{T: t},
		rpc: newRotatingTLS(t, filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key"), caFiles...)}
	for i, id := range ids {
		reload := "200ms"
		if i == 0 {
			reload = "0" // SIGHUP only
		}
		nd := secureNode(t, dir, id, "--tls-reload-interval", reload)
		nd.RPC = logdv1connect.NewLogServiceClient(&http.Client{Transport: rig.rpc.transport(), Timeout: 10 * time.Second}, "https://"+nd.Listen)
		rig.c.Nodes = append(rig.c.Nodes, nd)
	}
	rig.c.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	if long {
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Minute)
	}
	defer cancel()
	c := rig.c
	const topic, parts = "rotation", 3
	e2e.CreateTopic(t, ctx, c.Leader(ctx), topic, parts, nil)
	st, err := c.Leader(ctx).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	firstTerm := st.Term

	// The producers: one through each node (the followers forward to the
	// leader over peer TLS), with the admin's certificate, on connections
	// closed every 200 ms so their handshakes meet every phase.
	perPhase, producersPerNode := 200, 1
	if long {
		perPhase, producersPerNode = 2000, 3
	}
	tr := rig.rpc.transport()
	ps := e2e.NewProducers(5)
	ps.HTTPClient = &http.Client{Transport: tr}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range producersPerNode * len(c.Nodes) {
		nd := c.Nodes[i%len(c.Nodes)]
		wg.Go(func() { ps.Run(ctx, t, "https://"+nd.Listen, topic, i, stop) })
	}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
				tr.CloseIdleConnections()
			}
		}
	})
	stopped := false
	stopLoad := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer stopLoad()
	ps.WaitAcks(t, ctx, "acknowledgements before the rotation", perPhase)
	transfers := 0

	// New keys and certificates of the same CA, the key first as
	// docs/security.md asks.
	for _, id := range ids {
		issueNow(t, "node", "--dir", dir, "--id", id, "--hosts", "127.0.0.1", "--force")
	}
	rig.reload()
	rig.waitPresented(ctx)
	ps.WaitAcks(t, ctx, "acknowledgements after the node certificates changed", perPhase)
	rig.transfer(ctx, ps, perPhase)
	transfers++

	if long {
		rig.rotateCA(ctx, next, ps, perPhase)
		transfers += 2
	}

	stopLoad()
	c.Converge(ctx)
	acks, attempted, calls, failed := ps.Results()
	c.CheckEveryNode(ctx, topic, parts, acks, attempted)
	st, err = c.Leader(ctx).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d records acknowledged in %d produce calls (%d failed); Raft term %d -> %d with %d leadership transfers",
		len(acks), calls, failed, firstTerm, st.Term, transfers)
}

// rotateCA moves the cluster from the CA in r.dir to the CA in next, in
// docs/security.md's three steps, under the producers' load, and checks
// that certificates of the old CA are refused afterwards.
func (r *rotationRig) rotateCA(ctx context.Context, next string, ps *e2e.Producers, perPhase int) {
	t := r.t
	bundle := filepath.Join(r.dir, "ca.crt")
	oldCA, newCA := readFile(t, bundle), readFile(t, filepath.Join(next, "ca.crt"))
	// A node certificate of the old CA, kept to knock on the Raft ports
	// once the old CA is gone.
	oldNode, err := tls.X509KeyPair(readFile(t, filepath.Join(r.dir, "n1.crt")), readFile(t, filepath.Join(r.dir, "n1.key")))
	if err != nil {
		t.Fatal(err)
	}

	// 1. Every bundle holds both CAs. A client of the new CA is let in
	// everywhere once every node reloaded.
	replaceFile(t, bundle, append(bytes.Clone(oldCA), newCA...))
	r.reload()
	newAdmin := newRotatingTLS(t, filepath.Join(next, "admin.crt"), filepath.Join(next, "admin.key"), bundle)
	actx, cancel := context.WithTimeout(ctx, reloadWait)
	defer cancel()
	for _, nd := range r.c.Nodes {
		rpc := logdv1connect.NewLogServiceClient(&http.Client{Transport: newAdmin.transport(), Timeout: 10 * time.Second}, "https://"+nd.Listen)
		e2e.WaitFor(t, actx, nd.ID+" lets a client of the new CA in", func() bool {
			_, err := rpc.Status(actx, connect.NewRequest(&logdv1.StatusRequest{}))
			return err == nil
		})
	}
	ps.WaitAcks(t, ctx, "acknowledgements with both CAs in the bundles", perPhase)

	// 2. Node certificates of the new CA, and the clients' too.
	for _, nd := range r.c.Nodes {
		issueNow(t, "node", "--dir", next, "--id", nd.ID, "--hosts", "127.0.0.1")
		replaceFile(t, filepath.Join(r.dir, nd.ID+".key"), readFile(t, filepath.Join(next, nd.ID+".key")))
		replaceFile(t, filepath.Join(r.dir, nd.ID+".crt"), readFile(t, filepath.Join(next, nd.ID+".crt")))
	}
	r.reload()
	r.waitPresented(ctx)
	r.rpc.use(t, filepath.Join(next, "admin.crt"), filepath.Join(next, "admin.key"))
	r.transfer(ctx, ps, perPhase)

	// A client of the old CA that trusts both CAs, with sessions to
	// resume on every node, made while the old CA is still trusted.
	old := newRotatingTLS(t, filepath.Join(r.dir, "admin.crt"), filepath.Join(r.dir, "admin.key"), bundle)
	oldTr := old.transport()
	defer oldTr.CloseIdleConnections()
	oldRPC := map[*e2e.Node]logdv1connect.LogServiceClient{}
	for _, nd := range r.c.Nodes {
		oldRPC[nd] = logdv1connect.NewLogServiceClient(&http.Client{Transport: oldTr, Timeout: 10 * time.Second}, "https://"+nd.Listen)
		if _, err := oldRPC[nd].Status(ctx, connect.NewRequest(&logdv1.StatusRequest{})); err != nil {
			t.Fatalf("%s: a client of the old CA before the old CA is removed: %v", nd.ID, err)
		}
	}

	// 3. The bundles hold the new CA alone.
	replaceFile(t, bundle, newCA)
	r.reload()
	rctx, cancel := context.WithTimeout(ctx, reloadWait)
	defer cancel()
	for _, nd := range r.c.Nodes {
		e2e.WaitFor(t, rctx, nd.ID+" refuses a client of the old CA at its next handshake", func() bool {
			oldTr.CloseIdleConnections()
			_, err := oldRPC[nd].Status(ctx, connect.NewRequest(&logdv1.StatusRequest{}))
			return err != nil && strings.Contains(err.Error(), "tls: ")
		})
		e2e.WaitFor(t, rctx, nd.ID+"'s Raft port refuses a node certificate of the old CA", func() bool {
			return raftRefuses(nd.Raft, oldNode)
		})
	}
	ps.WaitAcks(t, ctx, "acknowledgements with the new CA alone", perPhase)
	r.transfer(ctx, ps, perPhase)
}

// raftRefuses reports whether the Raft port at addr refuses cert: the
// handshake fails, or the port closes the connection with an alert. A
// port that admits it hands it to Raft, which waits for an RPC: the read
// times out.
func raftRefuses(addr string, cert tls.Certificate) bool {
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := tls.DialWithDialer(&d, "tcp", addr, &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}) // only knocking
	if err != nil {
		return true
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(time.Second))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}
