package replication

import (
	"context"
	"crypto/rand"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
)

func newTokenVerifier(t *testing.T, principal string) (auth.Token, auth.Verifier) {
	t.Helper()
	tok, err := auth.NewToken(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p, err := auth.ParsePrincipal(principal)
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(tok, p, "", time.Now().UnixMilli(), 0, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return tok, v
}

var (
	aclAliceBilling = auth.ACL{Principal: "User:alice", Resource: auth.ResourceTopic, Pattern: auth.PatternPrefix, Name: "billing.", Operation: auth.OpWrite, Effect: auth.Allow}
	aclDenySecret   = auth.ACL{Principal: "User:alice", Resource: auth.ResourceTopic, Pattern: auth.PatternLiteral, Name: "billing.secret", Operation: auth.OpWrite, Effect: auth.Deny}
	aclPublic       = auth.ACL{Principal: "*", Resource: auth.ResourceTopic, Pattern: auth.PatternLiteral, Name: "public", Operation: auth.OpRead, Effect: auth.Allow}
)

// sameSecurity fails t unless b holds the tokens and ACLs want holds.
func sameSecurity(t *testing.T, what string, b, want *Backend) {
	t.Helper()
	if got, w := b.Tokens(), want.Tokens(); !reflect.DeepEqual(got, w) {
		t.Fatalf("%s: tokens %+v, want %+v", what, got, w)
	}
	if got, w := b.ACLs().ACLs(), want.ACLs().ACLs(); !reflect.DeepEqual(got, w) {
		t.Fatalf("%s: ACLs %v, want %v", what, got, w)
	}
	if got, w := b.SCRAMCredentials(), want.SCRAMCredentials(); !reflect.DeepEqual(got, w) {
		t.Fatalf("%s: SCRAM credentials %+v, want %+v", what, got, w)
	}
}

// TestSecurityStateFailover: tokens and ACLs are proposed only once every
// member's build understands them (fsm.SecurityLevel; SCRAM credentials
// fsm.SCRAMLevel), are replicated to
// every node, survive the leader's loss, can be changed on the new leader,
// and reach the old leader when it is back.
func TestSecurityStateFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newMemCluster(t, ctx, 3)
	bs := make([]*Backend, len(c.nodes))
	for i, n := range c.nodes {
		bs[i] = NewBackend(n)
	}
	leader := bs[0]
	c.waitFor(ctx, "n1 registers its level", func() bool { return c.nodes[0].FSM().NodeFeatureLevel("n1") == fsm.Level })
	tok, alice := newTokenVerifier(t, "User:alice")
	_, bob := newTokenVerifier(t, "User:bob")

	// The followers joined without registering a level: they count as
	// fsm.BaseLevel, then one registers the level before security.
	var fe *backend.FeatureLevelError
	if err := leader.CreateToken(ctx, alice, "User:admin"); !errors.As(err, &fe) || fe.Need != backend.FeatureLevel(fsm.SecurityLevel) || fe.Cluster != backend.FeatureLevel(fsm.BaseLevel) {
		t.Fatalf("token in a base-level cluster: %v", err)
	}
	if err := c.nodes[0].register(ctx, fsm.NodeRegister{ID: "n2", APIAddress: "n2-api", FeatureLevel: fsm.Level}); err != nil {
		t.Fatal(err)
	}
	if err := c.nodes[0].register(ctx, fsm.NodeRegister{ID: "n3", APIAddress: "n3-api", FeatureLevel: fsm.QuotaLevel}); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.CreateACLs(ctx, []auth.ACL{aclPublic}); !errors.As(err, &fe) || fe.Cluster != backend.FeatureLevel(fsm.QuotaLevel) || !errors.Is(err, backend.ErrFeatureLevel) {
		t.Fatalf("ACLs with a member at level %d: %v", fsm.QuotaLevel, err)
	}
	// A member below fsm.SCRAMLevel: no SCRAM credential is proposed.
	if err := c.nodes[0].register(ctx, fsm.NodeRegister{ID: "n3", APIAddress: "n3-api", FeatureLevel: fsm.ProducerLevel}); err != nil {
		t.Fatal(err)
	}
	cred, err := auth.SCRAMCredentialFromSalted(auth.SCRAMSHA256, "alice", "pw", []byte("salt"), auth.MinSCRAMIterations)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leader.SetSCRAMCredential(ctx, cred, "User:admin"); !errors.As(err, &fe) || fe.Need != backend.FeatureLevel(fsm.SCRAMLevel) || fe.Cluster != backend.FeatureLevel(fsm.ProducerLevel) {
		t.Fatalf("SCRAM credential with a member at level %d: %v", fsm.ProducerLevel, err)
	}
	if err := c.nodes[0].register(ctx, fsm.NodeRegister{ID: "n3", APIAddress: "n3-api", FeatureLevel: fsm.Level}); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.SetSCRAMCredential(ctx, cred, "User:admin"); err != nil {
		t.Fatal(err)
	}

	for _, v := range []auth.Verifier{alice, bob} {
		if err := leader.CreateToken(ctx, v, "User:admin"); err != nil {
			t.Fatal(err)
		}
	}
	if err := leader.CreateToken(ctx, alice, "User:admin"); !errors.Is(err, backend.ErrTokenExists) {
		t.Fatalf("the same token again: %v", err)
	}
	if n, err := leader.CreateACLs(ctx, []auth.ACL{aclAliceBilling, aclDenySecret, aclPublic, aclPublic}); err != nil || n != 3 {
		t.Fatalf("create ACLs: %d, %v", n, err)
	}
	if _, err := leader.DeleteACLs(ctx, auth.Filter{}, false); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Fatalf("delete with an empty filter: %v", err)
	}
	if _, err := bs[1].CreateACLs(ctx, []auth.ACL{aclPublic}); !errors.Is(err, backend.ErrNotLeader) {
		t.Fatalf("create on a follower: %v", err)
	}
	for i := range bs[1:] {
		c.waitFor(ctx, "followers apply", func() bool { return c.nodes[i+1].FSM().AppliedIndex() >= c.nodes[0].FSM().AppliedIndex() })
		sameSecurity(t, c.nodes[i+1].NodeID(), bs[i+1], leader)
	}

	// The leader is cut off: one of the others takes over with the same
	// state, and changes it.
	c.isolate(0, true)
	var next *Backend
	c.waitFor(ctx, "a new leader", func() bool {
		for _, b := range bs[1:] {
			if b.IsLeader() && b.Ready() {
				next = b
				return true
			}
		}
		return false
	})
	sameSecurity(t, "new leader", next, leader)
	if v, ok := next.Token(alice.ID); !ok || !v.Check(tok, time.Now().UnixMilli()) {
		t.Fatal("alice's token does not check on the new leader")
	}
	if !next.ACLs().Authorize(auth.User("alice"), auth.Permission{Op: auth.OpWrite, Resource: auth.ResourceTopic, Name: "billing.x"}).Allowed {
		t.Fatal("alice's ACL does not authorize on the new leader")
	}
	if info, err := next.RevokeToken(ctx, bob.ID); err != nil || info.ID != bob.ID || info.Principal != "User:bob" || info.CreatedBy != "User:admin" {
		t.Fatalf("revoke bob: %+v, %v", info, err)
	}
	if _, err := next.RevokeToken(ctx, bob.ID); !errors.Is(err, backend.ErrUnknownToken) {
		t.Fatalf("revoke bob again: %v", err)
	}
	filter := auth.Filter{Principal: "User:alice", Effect: auth.Deny}
	before := next.ACLs()
	if dry, err := next.DeleteACLs(ctx, filter, true); err != nil || !reflect.DeepEqual(dry, []auth.ACL{aclDenySecret}) || next.ACLs() != before {
		t.Fatalf("dry run: %v, %v", dry, err)
	}
	if removed, err := next.DeleteACLs(ctx, filter, false); err != nil || !reflect.DeepEqual(removed, []auth.ACL{aclDenySecret}) {
		t.Fatalf("delete: %v, %v", removed, err)
	}
	if got := next.ACLs().ACLs(); !reflect.DeepEqual(got, []auth.ACL{aclAliceBilling, aclPublic}) {
		t.Fatalf("ACLs after the delete: %v", got)
	}

	// The old leader is back: it follows and holds the new state.
	c.isolate(0, false)
	c.waitFor(ctx, "the old leader catches up", func() bool {
		return bs[0].FSM().AppliedIndex() >= next.FSM().AppliedIndex() && !bs[0].IsLeader()
	})
	sameSecurity(t, "old leader", bs[0], next)
	if _, ok := bs[0].Token(bob.ID); ok {
		t.Fatal("the old leader still knows the revoked token")
	}
}

// TestSecurityStateRestart: tokens and ACLs survive a restart from a
// snapshot whose Raft log no longer holds the entries that made them.
func TestSecurityStateRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	open := func() *Backend {
		n := openSingleNode(t, ctx, Config{DataDir: dir, TrailingLogs: 1, APIAdvertise: "127.0.0.1:1", Fatal: func(err error) { t.Errorf("fatal: %v", err) }})
		for n.FSM().NodeFeatureLevel("n1") != fsm.Level {
			select {
			case <-ctx.Done():
				n.Close()
				t.Fatal("the node does not register its level")
			case <-time.After(10 * time.Millisecond):
			}
		}
		return NewBackend(n)
	}
	b := open()
	tok, alice := newTokenVerifier(t, "User:alice")
	if err := b.CreateToken(ctx, alice, "User:admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateACLs(ctx, []auth.ACL{aclAliceBilling, aclDenySecret}); err != nil {
		t.Fatal(err)
	}
	last := b.FSM().AppliedIndex()
	if _, err := b.CreateTopic(ctx, backend.CreateTopic{Name: "after", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.Snapshot(); err != nil {
		t.Fatal(err)
	}
	tokens, acls := b.Tokens(), b.ACLs().ACLs()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b = open()
	defer b.Close()
	if first, err := b.stores.logs.FirstIndex(); err != nil || first <= last {
		t.Fatalf("the Raft log starts at %d (%v): it still holds the security entries (up to %d), so the test proves nothing", first, err, last)
	}
	if got := b.Tokens(); !reflect.DeepEqual(got, tokens) {
		t.Fatalf("tokens after the restart %+v, want %+v", got, tokens)
	}
	if got := b.ACLs().ACLs(); !reflect.DeepEqual(got, acls) {
		t.Fatalf("ACLs after the restart %v, want %v", got, acls)
	}
	if v, ok := b.Token(alice.ID); !ok || !v.Check(tok, time.Now().UnixMilli()) {
		t.Fatal("alice's token does not check after the restart")
	}
}
