package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/internal/e2e"
)

// secureNode prepares node id with its certificate from dir (logd cert
// output), TLS on the API and between nodes, --auth required and the
// admin client as superuser; its rpc client is the admin.
func secureNode(t *testing.T, dir, id string, extra ...string) *e2e.Node {
	t.Helper()
	nd := e2e.NewNode(t, id, append([]string{
		"--tls-cert", filepath.Join(dir, id+".crt"), "--tls-key", filepath.Join(dir, id+".key"), "--tls-client-ca", filepath.Join(dir, "ca.crt"),
		"--auth", "required", "--superuser", "admin",
	}, extra...)...)
	nd.RPC = logdv1connect.NewLogServiceClient(&http.Client{
		Transport: &http.Transport{TLSClientConfig: clientTLS(t, dir, "admin"), ForceAttemptHTTP2: true},
		Timeout:   10 * time.Second,
	}, "https://"+nd.Listen)
	return nd
}

// TestSecureCluster: three real nodes, certificates from logd cert, TLS on
// every API and between the nodes and --auth required, form a cluster; a
// write through a follower is forwarded to the leader and read back on
// every node; a plaintext client and a client without a certificate are
// refused; a node whose certificate another CA signed never joins.
func TestSecureCluster(t *testing.T) {
	dir := t.TempDir()
	issueNow(t, "ca", "--dir", dir)
	for _, id := range []string{"n1", "n2", "n3"} {
		issueNow(t, "node", "--dir", dir, "--id", id, "--hosts", "127.0.0.1")
	}
	issueNow(t, "client", "--dir", dir, "--name", "admin")

	c := &e2e.Cluster{T: t}
	for _, id := range []string{"n1", "n2", "n3"} {
		c.Nodes = append(c.Nodes, secureNode(t, dir, id))
	}
	c.Start()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leader := c.Leader(ctx)
	var followers []*e2e.Node
	for _, nd := range c.Nodes {
		if nd != leader {
			followers = append(followers, nd)
		}
	}

	e2e.CreateTopic(t, ctx, followers[0], "secure", 1, nil)
	var want []string
	for i := range 5 {
		v := fmt.Sprintf("v%d", i)
		want = append(want, v)
		if _, err := followers[1].RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "secure", Records: []*logdv1.Record{{Value: []byte(v)}}})); err != nil {
			t.Fatalf("produce through follower %s: %v", followers[1].ID, err)
		}
	}
	for _, nd := range c.Nodes {
		e2e.WaitFor(t, ctx, nd.ID+" has every record", func() bool {
			resp, err := nd.RPC.Fetch(ctx, connect.NewRequest(&logdv1.FetchRequest{Topic: "secure", MaxBytes: 1 << 20}))
			if err != nil || len(resp.Msg.Records) != len(want) {
				return false
			}
			for i, r := range resp.Msg.Records {
				if string(r.Value) != want[i] {
					t.Fatalf("%s: record %d is %q, want %q", nd.ID, i, r.Value, want[i])
				}
			}
			return true
		})
	}

	// Clients without TLS, or without a certificate of the CA.
	if resp, err := http.Get("http://" + leader.Listen + "/readyz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("a plaintext request was answered 200")
		}
	}
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS(t, dir, "")}, Timeout: 10 * time.Second}
	if resp, err := noCert.Get("https://" + leader.Listen + "/readyz"); err == nil {
		resp.Body.Close()
		t.Errorf("a client without a certificate got %s", resp.Status)
	}

	// A node of another CA asks to join. It trusts the cluster's CA as
	// well as its own (its ca.crt holds both), so the refusal is the
	// cluster's, not its own.
	strangers := t.TempDir()
	issueNow(t, "ca", "--dir", strangers)
	issueNow(t, "node", "--dir", strangers, "--id", "n4", "--hosts", "127.0.0.1")
	issueNow(t, "client", "--dir", strangers, "--name", "admin")
	own, err := os.ReadFile(filepath.Join(strangers, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	clusterCA, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(strangers, "ca.crt"), append(own, clusterCA...), 0o644); err != nil {
		t.Fatal(err)
	}
	n4 := secureNode(t, strangers, "n4")
	n4.Launch(c.Nodes[0].Listen)
	e2e.WaitFor(t, ctx, "n4's join refused by the cluster", func() bool {
		b, _ := os.ReadFile(n4.Logs.Name())
		return strings.Count(string(b), "failed; retrying") >= 2 // the ask for the secret, or the join
	})
	if b, _ := os.ReadFile(n4.Logs.Name()); strings.Contains(string(b), "verify server") {
		t.Fatalf("n4 refused the cluster, not the other way round:\n%s", e2e.Tail(string(b), 2000))
	}
	st, err := leader.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Members) != 3 {
		t.Fatalf("members %v: a node of another CA joined", st.Members)
	}
}
