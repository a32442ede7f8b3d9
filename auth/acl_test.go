package auth

import (
	"encoding/json"
	"errors"
	"testing"
)

func mustSet(t testing.TB, acls ...ACL) *Set {
	t.Helper()
	s, err := NewSet(acls)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func allow(principal string, r ResourceType, pt PatternType, name string, op Operation) ACL {
	return ACL{Principal: principal, Resource: r, Pattern: pt, Name: name, Operation: op, Effect: Allow}
}

func deny(principal string, r ResourceType, pt PatternType, name string, op Operation) ACL {
	a := allow(principal, r, pt, name, op)
	a.Effect = Deny
	return a
}

func TestAuthorize(t *testing.T) {
	alice, bob := User("alice"), User("bob")
	s := mustSet(t,
		allow("User:alice", ResourceTopic, PatternPrefix, "billing.", OpWrite),
		allow("User:alice", ResourceTopic, PatternLiteral, "orders", OpRead),
		deny("User:alice", ResourceTopic, PatternLiteral, "billing.secret", OpWrite),
		allow("*", ResourceTopic, PatternLiteral, "public", OpRead),
		allow("User:bob", ResourceGroup, PatternLiteral, "*", OpAll),
		deny("*", ResourceGroup, PatternPrefix, "admin-", OpDelete),
		allow("User:alice", ResourceCluster, PatternLiteral, ClusterName, OpDescribe),
	)
	cases := []struct {
		name string
		p    Principal
		perm Permission
		want bool
	}{
		{"prefix matches", alice, Permission{OpWrite, ResourceTopic, "billing.invoices"}, true},
		{"prefix matches the prefix itself", alice, Permission{OpWrite, ResourceTopic, "billing."}, true},
		{"prefix does not match a shorter name", alice, Permission{OpWrite, ResourceTopic, "billing"}, false},
		{"prefix does not match elsewhere", alice, Permission{OpWrite, ResourceTopic, "x.billing.y"}, false},
		{"deny beats allow", alice, Permission{OpWrite, ResourceTopic, "billing.secret"}, false},
		{"deny of write leaves describe", alice, Permission{OpDescribe, ResourceTopic, "billing.secret"}, true},
		{"write implies describe", alice, Permission{OpDescribe, ResourceTopic, "billing.x"}, true},
		{"write does not imply read", alice, Permission{OpRead, ResourceTopic, "billing.x"}, false},
		{"literal is exact", alice, Permission{OpRead, ResourceTopic, "orders2"}, false},
		{"literal", alice, Permission{OpRead, ResourceTopic, "orders"}, true},
		{"other principal", bob, Permission{OpRead, ResourceTopic, "orders"}, false},
		{"wildcard principal", bob, Permission{OpRead, ResourceTopic, "public"}, true},
		{"wildcard principal covers anonymous", Anonymous, Permission{OpRead, ResourceTopic, "public"}, true},
		{"other resource type", alice, Permission{OpRead, ResourceGroup, "orders"}, false},
		{"all and literal star", bob, Permission{OpDelete, ResourceGroup, "g1"}, true},
		{"wildcard deny", bob, Permission{OpDelete, ResourceGroup, "admin-x"}, false},
		{"wildcard deny leaves other ops", bob, Permission{OpRead, ResourceGroup, "admin-x"}, true},
		{"cluster describe", alice, Permission{OpDescribe, ResourceCluster, ClusterName}, true},
		{"cluster admin", alice, Permission{OpAdmin, ResourceCluster, ClusterName}, false},
		{"node principal is not the user", Principal{TypeNode, "alice"}, Permission{OpRead, ResourceTopic, "orders"}, false},
		{"no ACL no access", User("carol"), Permission{OpDescribe, ResourceTopic, "orders"}, false},
		{"invalid resource", alice, Permission{OpRead, 0, "orders"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := s.Authorize(c.p, c.perm)
			if d.Allowed != c.want {
				t.Fatalf("Authorize(%s, %s) = %v (by %v), want %v", c.p, c.perm, d.Allowed, d.By, c.want)
			}
			if d.Allowed && d.By == nil {
				t.Fatal("allowed without a deciding ACL")
			}
		})
	}
	var nilSet *Set
	if nilSet.Authorize(alice, Permission{OpRead, ResourceTopic, "orders"}).Allowed {
		t.Fatal("nil set allowed")
	}
}

func TestAuthorizeDoesNotAllocate(t *testing.T) {
	s := mustSet(t, allow("User:alice", ResourceTopic, PatternPrefix, "billing.", OpWrite), deny("*", ResourceTopic, PatternLiteral, "x", OpAll))
	p := User("alice")
	perm := Permission{OpWrite, ResourceTopic, "billing.invoices"}
	if n := testing.AllocsPerRun(100, func() { s.Authorize(p, perm) }); n != 0 {
		t.Fatalf("Authorize allocates %v times per call", n)
	}
}

func TestValidate(t *testing.T) {
	good := allow("User:alice", ResourceTopic, PatternLiteral, "orders", OpRead)
	bad := map[string]func(a *ACL){
		"bare principal":        func(a *ACL) { a.Principal = "alice" },
		"bad principal type":    func(a *ACL) { a.Principal = "Group:x" },
		"empty principal name":  func(a *ACL) { a.Principal = "User:" },
		"no resource":           func(a *ACL) { a.Resource = 0 },
		"resource out of range": func(a *ACL) { a.Resource = 99 },
		"no pattern":            func(a *ACL) { a.Pattern = 0 },
		"no operation":          func(a *ACL) { a.Operation = 0 },
		"no effect":             func(a *ACL) { a.Effect = 0 },
		"prefix star":           func(a *ACL) { a.Pattern, a.Name = PatternPrefix, "*" },
		"empty name":            func(a *ACL) { a.Name = "" },
		"path name":             func(a *ACL) { a.Name = "a b" },
		"cluster name":          func(a *ACL) { a.Resource, a.Name = ResourceCluster, "other" },
	}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range bad {
		a := good
		mut(&a)
		if err := a.Validate(); !errors.Is(err, ErrInvalidACL) {
			t.Errorf("%s: Validate = %v, want ErrInvalidACL", name, err)
		}
		if _, err := NewSet([]ACL{good, a}); err == nil {
			t.Errorf("%s: NewSet accepted it", name)
		}
	}
}

func TestACLJSONRoundTrip(t *testing.T) {
	a := deny("*", ResourceQueue, PatternPrefix, "jobs.", OpAlter)
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"principal":"*","resource":"queue","pattern":"prefix","name":"jobs.","operation":"alter","effect":"deny"}`
	if string(b) != want {
		t.Fatalf("json = %s, want %s", b, want)
	}
	var back ACL
	if err := json.Unmarshal(b, &back); err != nil || back != a {
		t.Fatalf("round trip = %+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"operation":"fly"}`), &back); !errors.Is(err, ErrInvalidACL) {
		t.Fatalf("unknown operation: %v", err)
	}
}

func TestSetWithWithout(t *testing.T) {
	a := allow("User:alice", ResourceTopic, PatternLiteral, "orders", OpRead)
	b := allow("User:bob", ResourceTopic, PatternLiteral, "orders", OpRead)
	s := mustSet(t, a)
	s2, added, err := s.With([]ACL{a, b, b})
	if err != nil || added != 1 || s2.Len() != 2 {
		t.Fatalf("With = %d added, len %d, %v", added, s2.Len(), err)
	}
	if s.Len() != 1 {
		t.Fatal("With changed the original set")
	}
	s3, removed := s2.Without([]ACL{a})
	if len(removed) != 1 || s3.Len() != 1 || s3.Authorize(User("alice"), Permission{OpRead, ResourceTopic, "orders"}).Allowed {
		t.Fatalf("Without: removed %v, len %d", removed, s3.Len())
	}
	if !s3.Authorize(User("bob"), Permission{OpRead, ResourceTopic, "orders"}).Allowed {
		t.Fatal("Without dropped the other ACL")
	}
}

func TestParsePrincipal(t *testing.T) {
	for in, want := range map[string]string{"alice": "User:alice", "User:bob": "User:bob", "Node:n1": "Node:n1"} {
		p, err := ParsePrincipal(in)
		if err != nil || p.String() != want {
			t.Errorf("ParsePrincipal(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
	for _, in := range []string{"", "User:", "Admin:x", "a b", "User:a:b", "User:a,b"} {
		if _, err := ParsePrincipal(in); !errors.Is(err, ErrInvalidPrincipal) {
			t.Errorf("ParsePrincipal(%q) = %v, want ErrInvalidPrincipal", in, err)
		}
	}
}

func BenchmarkAuthorize(b *testing.B) {
	var acls []ACL
	for i := range 200 {
		acls = append(acls, allow("User:u"+string(rune('a'+i%26)), ResourceTopic, PatternPrefix, "t"+string(rune('a'+i%26))+".", OpWrite))
	}
	acls = append(acls, allow("User:alice", ResourceTopic, PatternPrefix, "billing.", OpWrite))
	s := mustSet(b, acls...)
	p := User("alice")
	perm := Permission{OpWrite, ResourceTopic, "billing.invoices"}
	b.ReportAllocs()
	for b.Loop() {
		if !s.Authorize(p, perm).Allowed {
			b.Fatal("denied")
		}
	}
}
