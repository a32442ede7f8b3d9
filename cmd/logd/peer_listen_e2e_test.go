package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/internal/e2e"
)

// TestPeerListenCluster: three real nodes with TLS, peer TLS, --auth
// required and each a --peer-listen port of its own form a cluster (the
// leader asks a joining node on its peer port). The client ports serve no
// segment endpoint; the peer ports serve it to node certificates only.
// A write through a follower succeeds: it reaches the leader's peer port,
// the only one where the leader believes the principal a follower
// forwards (on the client port the write would be the follower's own
// node certificate's, which may not write). A follower that missed more
// than Raft keeps catches up from a snapshot, copying segments from a peer
// port (the client ports would answer 404). Every node's Kafka port sits
// at its own offset from its API port, and each node's Metadata gives
// every node's Kafka address as that node registered it.
func TestPeerListenCluster(t *testing.T) {
	e2e.ParallelShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	issueNow(t, "ca", "--dir", dir)
	ids := []string{"n1", "n2", "n3"}
	for _, id := range ids {
		issueNow(t, "node", "--dir", dir, "--id", id, "--hosts", "127.0.0.1")
	}
	issueNow(t, "client", "--dir", dir, "--name", "admin")
	peerAddr, kafkaAddr := map[string]string{}, map[string]string{}
	c := &e2e.Cluster{T: t}
	for _, id := range ids {
		peerAddr[id], kafkaAddr[id] = e2e.FreeAddr(t), e2e.FreeAddr(t)
		c.Nodes = append(c.Nodes, secureNode(t, dir, id, "--peer-listen", peerAddr[id], "--kafka-listen", kafkaAddr[id],
			"--snapshot-threshold", "64", "--snapshot-interval", "200ms"))
	}
	c.Start()
	leader := c.Leader(ctx)
	var followers []*e2e.Node
	for _, nd := range c.Nodes {
		if nd != leader {
			followers = append(followers, nd)
		}
	}

	// Which port serves the segment endpoint, and to whom. Without its
	// parameters the endpoint answers 400; a port without it 404.
	get := func(addr, cert string) int {
		t.Helper()
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS(t, dir, cert)}, Timeout: 10 * time.Second}
		defer hc.CloseIdleConnections()
		resp, err := hc.Get("https://" + addr + backend.SegmentPathPrefix + "meta")
		if err != nil {
			t.Fatalf("GET %s as %s: %v", addr, cert, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(leader.Listen, leader.ID); code != http.StatusNotFound {
		t.Errorf("client port, segment endpoint, node certificate: %d, want 404", code)
	}
	if code := get(peerAddr[leader.ID], followers[0].ID); code != http.StatusBadRequest {
		t.Errorf("peer port, segment endpoint, node certificate: %d, want 400 from the endpoint", code)
	}
	if code := get(peerAddr[leader.ID], "admin"); code != http.StatusForbidden {
		t.Errorf("peer port, segment endpoint, client certificate: %d, want 403", code)
	}

	// A write through a follower, as admin (a superuser by its client
	// certificate).
	e2e.CreateTopic(t, ctx, followers[0], "peers", 1, nil)
	var want []string
	for i := range 5 {
		v := fmt.Sprintf("v%d", i)
		want = append(want, v)
		if _, err := e2e.ProduceOnce(ctx, followers[1], "peers", &logdv1.Record{Value: []byte(v), IdempotencyKey: v}); err != nil {
			t.Fatalf("produce through follower %s: %v", followers[1].ID, err)
		}
	}
	for _, nd := range c.Nodes {
		e2e.WaitFor(t, ctx, nd.ID+" has every record", func() bool {
			resp, err := nd.RPC.Fetch(ctx, connect.NewRequest(&logdv1.FetchRequest{Topic: "peers", MaxBytes: 1 << 20}))
			return err == nil && len(resp.Msg.Records) == len(want)
		})
	}

	// Snapshot catch-up: a follower misses more entries than Raft keeps
	// after a snapshot (512).
	victim := followers[0]
	victim.Kill()
	// One call at a time: each is its own Raft entry (calls in flight
	// together may share one: docs/architecture.md, "Coalesced appends").
	// The victim may have led the partition's data group: its other
	// replicas elect a leader, and a call may meet that.
	const writes = 640
	for i := range writes {
		v := fmt.Sprintf("w-%d", i)
		if _, err := e2e.ProduceOnce(ctx, leader, "peers", &logdv1.Record{Value: []byte(v), IdempotencyKey: v}); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	victim.Launch("")
	start := time.Now()
	cctx, ccancel := context.WithTimeout(ctx, time.Minute)
	defer ccancel()
	c.Converge(cctx)
	t.Logf("%s converged %v after its restart", victim.ID, time.Since(start).Round(time.Millisecond))
	logs, _ := os.ReadFile(victim.Logs.Name())
	if !strings.Contains(string(logs), "snapshot catch-up: fetching segments") {
		t.Errorf("%s caught up without installing a snapshot; the test did not exercise catch-up", victim.ID)
	}
	if strings.Contains(string(logs), "snapshot catch-up: peer failed") {
		t.Errorf("%s asked a peer that failed to serve segments:\n%s", victim.ID, e2e.Tail(string(logs), 3000))
	}
	first := e2e.Render(c.Nodes[0].ReadAll(ctx, "peers", 1))
	if n := strings.Count(first, "="); n != len(want)+writes {
		t.Errorf("%s holds %d records, want %d", c.Nodes[0].ID, n, len(want)+writes)
	}
	for _, nd := range c.Nodes[1:] {
		if got := e2e.Render(nd.ReadAll(ctx, "peers", 1)); got != first {
			t.Errorf("%s holds different records than %s", nd.ID, c.Nodes[0].ID)
		}
	}

	// Kafka Metadata on every node names every node at its own address.
	offsets := map[int]bool{}
	for _, id := range ids {
		offsets[port(t, kafkaAddr[id])-port(t, c.Nodes[slices.Index(ids, id)].Listen)] = true
	}
	if len(offsets) < 2 {
		t.Logf("the Kafka ports happen to share one offset %v; the Metadata check proves less", offsets)
	}
	for _, id := range ids {
		cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr[id]), kgo.DialTLSConfig(clientTLS(t, dir, "admin")))
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		resp, err := cl.SeedBrokers()[0].Request(ctx, req)
		cl.Close()
		if err != nil {
			t.Fatalf("metadata from %s: %v", id, err)
		}
		got := map[int32]string{}
		for _, b := range resp.(*kmsg.MetadataResponse).Brokers {
			got[b.NodeID] = fmt.Sprintf("%s:%d", b.Host, b.Port)
		}
		for i, want := range ids {
			if got[int32(i+1)] != kafkaAddr[want] {
				t.Errorf("%s's Metadata gives broker %d (%s) at %q, want %s", id, i+1, want, got[int32(i+1)], kafkaAddr[want])
			}
		}
	}

	// A topic created through a follower's Kafka port is forwarded to the
	// leader's peer port as admin's (the follower's own node certificate
	// may not create topics): the leader believes the principal.
	f := followers[1]
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr[f.ID]), kgo.DialTLSConfig(clientTLS(t, dir, "admin")))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "via-kafka", 2, -1
	create.Topics = append(create.Topics, ct)
	resp, err := cl.SeedBrokers()[0].Request(ctx, create)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.(*kmsg.CreateTopicsResponse).Topics[0]; got.ErrorCode != 0 {
		t.Fatalf("CreateTopics as admin through follower %s's Kafka port: code %d (%v)", f.ID, got.ErrorCode, got.ErrorMessage)
	}
	if _, err := leader.RPC.DescribeTopic(ctx, connect.NewRequest(&logdv1.DescribeTopicRequest{Name: "via-kafka"})); err != nil {
		t.Fatalf("the leader after CreateTopics through a follower: %v", err)
	}
}

// port is the port of a host:port address.
func port(t *testing.T, addr string) int {
	t.Helper()
	var p int
	if _, err := fmt.Sscanf(addr[strings.LastIndex(addr, ":")+1:], "%d", &p); err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return p
}
