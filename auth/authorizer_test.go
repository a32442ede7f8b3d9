package auth

import "testing"

// TestAuthorizer: checks off allow everything; a superuser holds every
// permission; anyone else what the ACLs of the moment grant (the set is
// read at every decision, so a change applies to the next one).
func TestAuthorizer(t *testing.T) {
	write := Permission{OpWrite, ResourceTopic, "orders"}
	acls := mustSet(t, allow("User:alice", ResourceTopic, PatternLiteral, "orders", OpWrite))
	cur := acls
	on := NewAuthorizer(true, []Principal{User("root")}, func() *Set { return cur })
	off := NewAuthorizer(false, nil, func() *Set { return nil })
	cases := []struct {
		name string
		a    *Authorizer
		p    Principal
		want bool
	}{
		{"off allows anyone", off, User("mallory"), true},
		{"off allows anonymous", off, Anonymous, true},
		{"granted", on, User("alice"), true},
		{"not granted", on, User("bob"), false},
		{"anonymous", on, Anonymous, false},
		{"superuser", on, User("root"), true},
		{"a superuser's name as another type", on, Principal{Type: TypeNode, Name: "root"}, false},
	}
	for _, tc := range cases {
		if got := tc.a.Allowed(tc.p, write); got != tc.want {
			t.Errorf("%s: Allowed(%s, %s) = %v, want %v", tc.name, tc.p, write, got, tc.want)
		}
	}
	if !on.Required() || off.Required() || !on.Superuser(User("root")) || on.Superuser(User("alice")) {
		t.Error("Required or Superuser wrong")
	}
	cur = nil
	if on.Allowed(User("alice"), write) {
		t.Error("allowed with the ACLs gone")
	}
	cur = acls
	if n := testing.AllocsPerRun(100, func() { on.Allowed(User("alice"), write) }); n != 0 {
		t.Errorf("Allowed allocates %v times", n)
	}
}
