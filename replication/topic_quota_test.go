package replication

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
)

// TestTopicPrincipalQuota: the proposer records the principal of the
// call's context on the topic, whatever the caller put in the command, and
// the per-principal quota refuses a principal's creation past it with a
// *backend.QuotaError naming the principal, while others still create.
func TestTopicPrincipalQuota(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := openSingleNode(t, ctx, Config{DataDir: t.TempDir(), APIAdvertise: "127.0.0.1:1",
		Quota: backend.TopicQuota{MaxTopics: 10, MaxTopicsPerPrincipal: 1, MaxPartitionsPerPrincipal: 3}, Fatal: func(err error) { t.Errorf("fatal: %v", err) }})
	defer n.Close()
	for n.FSM().NodeFeatureLevel("n1") != fsm.Level {
		select {
		case <-ctx.Done():
			t.Fatal("the node does not register its level")
		case <-time.After(10 * time.Millisecond):
		}
	}
	alice, bob := backend.WithPrincipal(ctx, auth.User("alice")), backend.WithPrincipal(ctx, auth.User("bob"))
	if _, err := NewBackend(n).createTopic(alice, fsm.CreateTopic{Name: "a1", Partitions: 2, Principal: "User:bob"}); err != nil {
		t.Fatal(err)
	}
	var qe *backend.QuotaError
	if _, err := NewBackend(n).createTopic(alice, fsm.CreateTopic{Name: "a2", Partitions: 1}); !errors.As(err, &qe) || qe.Principal != "User:alice" || qe.Resource != "topics" {
		t.Fatalf("alice's second topic: %v", err)
	}
	if _, err := NewBackend(n).createTopic(bob, fsm.CreateTopic{Name: "b1", Partitions: 4}); !errors.As(err, &qe) || qe.Principal != "User:bob" || qe.Resource != "partitions" {
		t.Fatalf("bob's 4 partitions: %v", err)
	}
	if _, err := NewBackend(n).createTopic(bob, fsm.CreateTopic{Name: "b1", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "anon", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a1": "User:alice", "b1": "User:bob", "anon": auth.Anonymous.String()} {
		if tp, err := n.FSM().Topic(name); err != nil || tp.CreatedBy != want {
			t.Fatalf("%s created by %q (%v), want %s", name, tp.CreatedBy, err, want)
		}
	}
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "anon2", Partitions: 1}); !errors.Is(err, backend.ErrQuotaExceeded) {
		t.Fatalf("the anonymous principal's second topic: %v", err)
	}
}

// TestTopicPrincipalQuotaBeforeSecurityLevel: while a member's build
// predates principals, the command carries neither the principal nor the
// per-principal bounds (that member would ignore them), so the topic
// records no principal and counts for nobody.
func TestTopicPrincipalQuotaBeforeSecurityLevel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newMemCluster(t, ctx, 3)
	n := c.nodes[0]
	n.cfg.Quota = backend.TopicQuota{MaxTopicsPerPrincipal: 1}
	for _, id := range []string{"n2", "n3"} {
		if err := n.register(ctx, fsm.NodeRegister{ID: id, APIAddress: id + "-api", FeatureLevel: fsm.QuotaLevel}); err != nil {
			t.Fatal(err)
		}
	}
	alice := backend.WithPrincipal(ctx, auth.User("alice"))
	if _, err := NewBackend(n).createTopic(alice, fsm.CreateTopic{Name: "a1", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if tp, err := n.FSM().Topic("a1"); err != nil || tp.CreatedBy != "" {
		t.Fatalf("a topic created at level %d records %q (%v)", fsm.QuotaLevel, tp.CreatedBy, err)
	}
	// Unrecorded, it counts for nobody: alice may create another.
	if _, err := NewBackend(n).createTopic(alice, fsm.CreateTopic{Name: "a2", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
}
