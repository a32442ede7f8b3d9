package peer

import (
	"testing"
)

func TestParseRoutes(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Routes
		bad      bool
	}{
		{name: "empty", in: "", want: Routes{}},
		{name: "both kinds", in: "n2/raft=127.0.0.1:1,n2/api=127.0.0.1:2,n3/api=h:3",
			want: Routes{"n2": {Raft: "127.0.0.1:1", API: "127.0.0.1:2"}, "n3": {API: "h:3"}}},
		{name: "id with a slash", in: "a/b/raft=x:1", want: Routes{"a/b": {Raft: "x:1"}}},
		{name: "no kind", in: "n2=127.0.0.1:1", bad: true},
		{name: "unknown kind", in: "n2/grpc=127.0.0.1:1", bad: true},
		{name: "no address", in: "n2/raft=", bad: true},
		{name: "no id", in: "/raft=x:1", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRoutes(tc.in)
			if tc.bad {
				if err == nil {
					t.Fatalf("ParseRoutes(%q) = %v; want an error", tc.in, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tc.want.String() || len(got) != len(tc.want) {
				t.Fatalf("ParseRoutes(%q) = %v, want %v", tc.in, got, tc.want)
			}
			again, err := ParseRoutes(got.String())
			if err != nil || again.String() != got.String() {
				t.Fatalf("round trip of %q: %v, %v", got.String(), again, err)
			}
		})
	}
}

// TestResolver: Raft dials a routed peer at its route and falls back
// for others; an API or peer address is routed once the registry names
// its node.
func TestResolver(t *testing.T) {
	var none *Resolver
	if got := none.API("a:1"); got != "a:1" {
		t.Errorf("nil resolver: API(a:1) = %q", got)
	}
	if none.Routes() != nil {
		t.Error("nil resolver: routes")
	}
	none.Attach(func(string) (string, bool) { return "a", true })

	routes := Routes{"a": {Raft: "p:1", API: "p:2"}, "b": {Raft: "p:3"}}
	r := NewResolver(routes)
	if got, other := r.Raft("a", "a:0"), r.Raft("c", "c:0"); got != "p:1" || other != "c:0" {
		t.Errorf("Raft(a) = %q, Raft(c) = %q; want the route and the address itself", got, other)
	}
	if got := none.Raft("a", "a:0"); got != "a:0" {
		t.Errorf("nil resolver: Raft(a) = %q", got)
	}
	if got := r.API("a:1"); got != "a:1" {
		t.Errorf("before the registry is attached: API(a:1) = %q", got)
	}
	if got := r.Routes(); got.String() != routes.String() {
		t.Errorf("Routes() = %v, want %v", got, routes)
	}
	registered := map[string]string{"a:1": "a", "a:9": "a", "b:1": "b"}
	r.Attach(func(addr string) (string, bool) { id, ok := registered[addr]; return id, ok })
	// A node's route covers its peer address as well as its API address.
	for addr, want := range map[string]string{"a:1": "p:2", "a:9": "p:2", "b:1": "b:1", "c:1": "c:1"} {
		if got := r.API(addr); got != want {
			t.Errorf("API(%s) = %q, want %q", addr, got, want)
		}
	}
}
