package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/internal/e2e"
)

// scramPing authenticates to a node's Kafka listener with SCRAM-SHA-256
// and returns the error of a request there.
func scramPing(ctx context.Context, addr, user, password string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha256Mechanism()),
		kgo.RetryTimeout(2*time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return cl.Ping(pctx)
}

// TestClusterSCRAMSnapshotAndRestart: SCRAM credentials are replicated
// state. A follower that was down while a credential was set, and while
// enough was written for the leader to snapshot and cut its log, installs
// the leader's snapshot when it comes back and authenticates the user on
// its own Kafka listener; a credential deleted while it is stopped again
// is refused there after its restart, the other still accepted.
func TestClusterSCRAMSnapshotAndRestart(t *testing.T) {
	e2e.ParallelShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := &e2e.Cluster{T: t}
	kafka := map[*e2e.Node]string{}
	for i := range 3 {
		kaddr := e2e.FreeAddr(t)
		// The meta group's snapshot, which its partitions' appends
		// drive, holds the credentials.
		nd := e2e.NewNode(t, fmt.Sprintf("n%d", i+1), append(e2e.MetaGroupOnly(), "--snapshot-threshold", "64", "--snapshot-interval", "200ms",
			"--kafka-listen", kaddr, "--kafka-sasl-mechanisms", "SCRAM-SHA-256")...)
		kafka[nd] = kaddr
		c.Nodes = append(c.Nodes, nd)
	}
	c.Start()
	l := c.Leader(ctx)
	victim := c.Nodes[2]
	if victim == l {
		victim = c.Nodes[1]
	}
	victim.Kill()

	for _, u := range []string{"alice", "bob"} {
		if _, err := l.RPC.SetScramCredential(ctx, connect.NewRequest(&logdv1.SetScramCredentialRequest{User: u, Mechanism: "SCRAM-SHA-256", Password: u + "-pw"})); err != nil {
			t.Fatal(err)
		}
	}
	st, err := l.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	setIndex := st.AppliedIndex
	// More Raft entries than a snapshot leaves behind (512 trailing
	// entries) and enough bytes to seal WAL segments (e2e.TestWALSegment)
	// that the snapshot lets go, one call at a time: each is its own
	// entry (calls in flight together may share one: docs/architecture.md,
	// "Coalesced appends").
	e2e.CreateTopic(t, ctx, l, "fill", 1, nil)
	writes := 800
	if e2e.FaultLong() {
		writes = 4000
	}
	value := make([]byte, 200)
	// Filler: a write refused, or of unknown outcome, when a loaded
	// machine costs the two live nodes their leader is sent again to
	// whichever leads (a filler record written twice changes nothing).
	for i := 0; i < writes; {
		if _, err := l.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "fill", Records: []*logdv1.Record{{Value: value}}})); err != nil {
			if ctx.Err() != nil {
				t.Fatalf("write %d: %v", i, err)
			}
			t.Logf("write %d: %v; again through the leader", i, err)
			l = c.Leader(ctx)
			continue
		}
		i++
	}
	time.Sleep(time.Second) // a snapshot interval or five

	logged := func() int64 {
		fi, err := victim.Logs.Stat()
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	from := logged()
	victim.Launch("")
	c.Converge(ctx)
	b, _ := os.ReadFile(victim.Logs.Name())
	restored := int64(-1)
	for _, m := range regexp.MustCompile(`msg="snapshot restored" index=(\d+)`).FindAllStringSubmatch(string(b[from:]), -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		restored = max(restored, n)
	}
	if restored < int64(setIndex) {
		t.Fatalf("%s restored no snapshot holding the credentials (index %d; they were set by %d): the test did not exercise an install", victim.ID, restored, setIndex)
	}
	e2e.WaitFor(t, ctx, victim.ID+" authenticates alice", func() bool { return scramPing(ctx, kafka[victim], "alice", "alice-pw") == nil })
	if err := scramPing(ctx, kafka[victim], "alice", "wrong"); err == nil {
		t.Fatalf("%s accepted a wrong password", victim.ID)
	}

	// Stopped again: bob's credential is deleted meanwhile.
	victim.Stop()
	if _, err := l.RPC.DeleteScramCredential(ctx, connect.NewRequest(&logdv1.DeleteScramCredentialRequest{User: "bob", Mechanism: "SCRAM-SHA-256"})); err != nil {
		t.Fatal(err)
	}
	victim.Launch("")
	c.Converge(ctx)
	list, err := victim.RPC.ListScramCredentials(ctx, connect.NewRequest(&logdv1.ListScramCredentialsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Msg.Credentials) != 1 || list.Msg.Credentials[0].User != "alice" {
		t.Fatalf("%s lists %v after its restart, want alice's alone", victim.ID, list.Msg.Credentials)
	}
	e2e.WaitFor(t, ctx, victim.ID+" authenticates alice after its restart", func() bool { return scramPing(ctx, kafka[victim], "alice", "alice-pw") == nil })
	if err := scramPing(ctx, kafka[victim], "bob", "bob-pw"); err == nil {
		t.Fatalf("%s authenticated bob, whose credential was deleted", victim.ID)
	}
}
