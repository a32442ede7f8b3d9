package fsm

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
)

const secNow = int64(1_700_000_000_000_000_000) // Unix ns
const secNowMs = secNow / 1e6

// fakeVerifier is a verifier that validates, cheap to make in bulk (no
// PBKDF2): the state machine only stores and validates verifiers.
func fakeVerifier(i int, principal string, createdMs, expiresMs int64) auth.Verifier {
	key := bytes.Repeat([]byte{byte(i)}, 32)
	return auth.Verifier{ID: fmt.Sprintf("%016x", i), Principal: principal, CreatedMs: createdMs, ExpiresMs: expiresMs, SHA256: key,
		SCRAM: auth.SCRAMKeys{Salt: []byte{1, 2, 3, 4}, Iterations: auth.SCRAMIterations, StoredKey: key, ServerKey: key}}
}

// realVerifier is a verifier of a fresh token, as CreateToken makes one.
func realVerifier(t *testing.T, principal string, createdMs int64) (auth.Token, auth.Verifier) {
	t.Helper()
	tok, err := auth.NewToken(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p, err := auth.ParsePrincipal(principal)
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(tok, p, "test", createdMs, 0, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return tok, v
}

func acl(principal string, r auth.ResourceType, pt auth.PatternType, name string, op auth.Operation, e auth.Effect) auth.ACL {
	return auth.ACL{Principal: principal, Resource: r, Pattern: pt, Name: name, Operation: op, Effect: e}
}

// mustEncode returns a function that fails t on an encoding error.
func mustEncode(t *testing.T) func([]byte, error) []byte {
	return func(data []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
}

// rawCommand is a command of type ct with payload p as is: what a faulty
// proposer could put in the log.
func rawCommand(ct CommandType, now int64, p string) []byte {
	return append(encodeHeader(nil, ct, now), p...)
}

// TestSecurityApply: tokens are created, found, listed and revoked; ACLs
// are added (duplicates kept once) and removed by filter; each refusal is
// typed and changes nothing.
func TestSecurityApply(t *testing.T) {
	must := mustEncode(t)
	f, fatals := testFSM(t, t.TempDir())
	tok, alice := realVerifier(t, "User:alice", secNowMs)
	bob := fakeVerifier(2, "User:bob", secNowMs-5, 0)
	billing := acl("User:alice", auth.ResourceTopic, auth.PatternPrefix, "billing.", auth.OpWrite, auth.Allow)
	secret := acl("User:alice", auth.ResourceTopic, auth.PatternLiteral, "billing.secret", auth.OpWrite, auth.Deny)
	public := acl("*", auth.ResourceTopic, auth.PatternLiteral, "public", auth.OpRead, auth.Allow)

	steps := []struct {
		name string
		cmd  []byte
		want any   // result, when not an error
		err  error // wanted error
	}{
		{name: "create alice", cmd: must(EncodeTokenCreate(secNow, alice, "User:admin")), want: backend.TokenInfo{ID: alice.ID, Principal: "User:alice", Description: "test", CreatedMs: secNowMs, CreatedBy: "User:admin"}},
		{name: "create bob", cmd: must(EncodeTokenCreate(secNow+1, bob, "User:ANONYMOUS")), want: backend.TokenInfo{ID: bob.ID, Principal: "User:bob", CreatedMs: secNowMs - 5, CreatedBy: "User:ANONYMOUS"}},
		{name: "create alice again", cmd: must(EncodeTokenCreate(secNow+2, alice, "User:admin")), err: backend.ErrTokenExists},
		{name: "revoke bob", cmd: must(EncodeTokenRevoke(secNow+3, bob.ID)), want: backend.TokenInfo{ID: bob.ID, Principal: "User:bob", CreatedMs: secNowMs - 5, CreatedBy: "User:ANONYMOUS"}},
		{name: "revoke bob again", cmd: must(EncodeTokenRevoke(secNow+4, bob.ID)), err: backend.ErrUnknownToken},
		{name: "add ACLs", cmd: must(EncodeACLCreate(secNow+5, []auth.ACL{billing, secret, billing})), want: 2},
		{name: "add ACLs again", cmd: must(EncodeACLCreate(secNow+6, []auth.ACL{secret, public})), want: 1},
		{name: "delete none", cmd: must(EncodeACLDelete(secNow+7, auth.Filter{Principal: "User:carol"})), want: []auth.ACL{}},
		{name: "delete alice's topic writes", cmd: must(EncodeACLDelete(secNow+8, auth.Filter{Principal: "User:alice", Operation: auth.OpWrite, Resource: auth.ResourceTopic})), want: []auth.ACL{billing, secret}},
		{name: "empty filter", cmd: rawCommand(CmdACLDelete, secNow+9, `{"filter":{}}`), err: backend.ErrInvalidArgument},
		{name: "add back", cmd: must(EncodeACLCreate(secNow+10, []auth.ACL{secret})), want: 1},
	}
	for i, st := range steps {
		before := f.ACLs()
		res := f.apply(Entry{Index: uint64(i + 1), Command: true, Data: st.cmd})
		if st.err != nil {
			if err, _ := res.(error); !errors.Is(err, st.err) {
				t.Fatalf("%s: got %v, want %v", st.name, res, st.err)
			}
			if f.ACLs() != before {
				t.Fatalf("%s: refused but the ACL set changed", st.name)
			}
			continue
		}
		if !reflect.DeepEqual(res, st.want) {
			t.Fatalf("%s: got %#v, want %#v", st.name, res, st.want)
		}
	}
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}
	if v, ok := f.Token(alice.ID); !ok || !v.Check(tok, secNowMs+1) {
		t.Fatal("alice's token does not check")
	}
	if _, ok := f.Token(bob.ID); ok {
		t.Fatal("bob's revoked token is found")
	}
	if got := f.Tokens(); len(got) != 1 || got[0].ID != alice.ID {
		t.Fatalf("tokens %+v", got)
	}
	if got, want := f.ACLs().ACLs(), []auth.ACL{public, secret}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ACLs %v, want %v", got, want)
	}
	if !f.ACLs().Authorize(auth.User("bob"), auth.Permission{Op: auth.OpRead, Resource: auth.ResourceTopic, Name: "public"}).Allowed {
		t.Fatal("the applied set does not authorize")
	}
	if f.AppliedIndex() != uint64(len(steps)) {
		t.Fatalf("applied %d", f.AppliedIndex())
	}
}

// TestSecurityBadPayloads: a payload the strict decoders refuse, should one
// reach the log, is an error result on every replica (backend.ErrInvalidArgument,
// with auth's sentinel where auth refused), changes nothing and does not
// stop the node; the Encode functions refuse the same values.
func TestSecurityBadPayloads(t *testing.T) {
	must := mustEncode(t)
	good := fakeVerifier(1, "User:alice", 1, 0)
	short := good
	short.SHA256 = short.SHA256[:31]
	bad := []struct {
		name string
		cmd  []byte
		also error
	}{
		{name: "not json", cmd: rawCommand(CmdTokenCreate, secNow, `{"verifier":`)},
		{name: "null", cmd: rawCommand(CmdTokenCreate, secNow, `null`), also: auth.ErrInvalidToken},
		{name: "unknown field", cmd: rawCommand(CmdTokenRevoke, secNow, `{"id":"0123456789abcdef","secret":"x"}`)},
		{name: "trailing data", cmd: rawCommand(CmdTokenRevoke, secNow, `{"id":"0123456789abcdef"}{}`)},
		{name: "bad token id", cmd: rawCommand(CmdTokenRevoke, secNow, `{"id":"0123456789ABCDEF"}`), also: auth.ErrInvalidToken},
		{name: "short digest", cmd: rawCommand(CmdTokenCreate, secNow, string(mustJSONPayload(t, tokenRecord{Verifier: short, CreatedBy: "User:a"}))), also: auth.ErrInvalidToken},
		{name: "created_by not canonical", cmd: rawCommand(CmdTokenCreate, secNow, string(mustJSONPayload(t, tokenRecord{Verifier: good, CreatedBy: "admin"}))), also: auth.ErrInvalidPrincipal},
		{name: "created_by empty", cmd: rawCommand(CmdTokenCreate, secNow, string(mustJSONPayload(t, tokenRecord{Verifier: good}))), also: auth.ErrInvalidPrincipal},
		{name: "no ACLs", cmd: rawCommand(CmdACLCreate, secNow, `{"acls":[]}`)},
		{name: "unknown operation", cmd: rawCommand(CmdACLCreate, secNow, `{"acls":[{"principal":"*","resource":"topic","pattern":"literal","name":"a","operation":"fly","effect":"allow"}]}`)},
		{name: "ACL missing effect", cmd: rawCommand(CmdACLCreate, secNow, `{"acls":[{"principal":"*","resource":"topic","pattern":"literal","name":"a","operation":"read"}]}`), also: auth.ErrInvalidACL},
		{name: "ACL unknown field", cmd: rawCommand(CmdACLCreate, secNow, `{"acls":[{"principal":"*","resource":"topic","pattern":"literal","name":"a","operation":"read","effect":"allow","host":"*"}]}`)},
		{name: "empty filter", cmd: rawCommand(CmdACLDelete, secNow, `{"filter":{}}`)},
		{name: "no filter", cmd: rawCommand(CmdACLDelete, secNow, `{}`)},
		{name: "filter with a bad name", cmd: rawCommand(CmdACLDelete, secNow, `{"filter":{"name":"a b"}}`), also: auth.ErrInvalidACL},
		{name: "filter with a numeric enum", cmd: rawCommand(CmdACLDelete, secNow, `{"filter":{"resource":1}}`)},
	}
	f, fatals := testFSM(t, t.TempDir())
	seed := acl("*", auth.ResourceTopic, auth.PatternLiteral, "a", auth.OpRead, auth.Allow)
	if res := f.apply(Entry{Index: 1, Command: true, Data: must(EncodeACLCreate(secNow, []auth.ACL{seed}))}); res != 1 {
		t.Fatalf("seed: %v", res)
	}
	before := f.ACLs()
	for i, tc := range bad {
		res := f.apply(Entry{Index: uint64(i + 2), Command: true, Data: sealEntry(tc.cmd)})
		err, _ := res.(error)
		if !errors.Is(err, backend.ErrInvalidArgument) || tc.also != nil && !errors.Is(err, tc.also) {
			t.Errorf("%s: got %v, want backend.ErrInvalidArgument (and %v)", tc.name, res, tc.also)
		}
	}
	if len(*fatals) != 0 || f.Failed() != nil {
		t.Fatalf("a bad payload stopped the node: %v", *fatals)
	}
	if f.ACLs() != before || len(f.Tokens()) != 0 || f.AppliedIndex() != uint64(len(bad)+1) {
		t.Fatalf("state changed: %d ACLs, %d tokens, applied %d", f.ACLs().Len(), len(f.Tokens()), f.AppliedIndex())
	}

	// The proposer's encoders refuse the same values.
	for name, err := range map[string]error{
		"short digest":  second(EncodeTokenCreate(secNow, short, "User:a")),
		"created_by":    second(EncodeTokenCreate(secNow, good, "admin")),
		"token id":      second(EncodeTokenRevoke(secNow, "x")),
		"no ACLs":       second(EncodeACLCreate(secNow, nil)),
		"invalid ACL":   second(EncodeACLCreate(secNow, []auth.ACL{{Principal: "*"}})),
		"empty filter":  second(EncodeACLDelete(secNow, auth.Filter{})),
		"bad principal": second(EncodeACLDelete(secNow, auth.Filter{Principal: "alice"})),
		"bad enum":      second(EncodeACLDelete(secNow, auth.Filter{Operation: 99})),
	} {
		if !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("encode with %s: %v, want backend.ErrInvalidArgument", name, err)
		}
	}
	if _, err := EncodeACLCreate(secNow, make([]auth.ACL, MaxACLs+1)); !errors.Is(err, backend.ErrTooManyACLs) {
		t.Errorf("encode of %d ACLs: %v", MaxACLs+1, err)
	}
}

func second(_ []byte, err error) error { return err }

func mustJSONPayload(t *testing.T, v any) []byte {
	t.Helper()
	d := mustJSON(t, CmdTokenCreate, 0, v)
	return d[cmdHeaderSize:]
}

// TestSecurityBounds: at MaxTokens live tokens a creation is refused
// (backend.ErrTooManyTokens), unless some are expired at the command's time, which
// are dropped to make room; past MaxACLs a creation is refused
// (backend.ErrTooManyACLs). Refusals change nothing.
func TestSecurityBounds(t *testing.T) {
	must := mustEncode(t)
	f, fatals := testFSM(t, t.TempDir())
	full := map[string]tokenRecord{}
	for i := range MaxTokens {
		exp := int64(0)
		if i < 3 {
			exp = secNowMs + 1000 // expire one second after secNow
		}
		v := fakeVerifier(i, "User:u", 1, exp)
		full[v.ID] = tokenRecord{Verifier: v, CreatedBy: "User:admin"}
	}
	f.security.install(full, nil, nil)
	extra := fakeVerifier(MaxTokens, "User:u", 1, 0)
	idx := uint64(0)
	apply := func(cmd []byte) any {
		idx++
		return f.apply(Entry{Index: idx, Command: true, Data: cmd})
	}
	if err, _ := apply(must(EncodeTokenCreate(secNow, extra, "User:admin"))).(error); !errors.Is(err, backend.ErrTooManyTokens) {
		t.Fatalf("token %d: %v, want backend.ErrTooManyTokens", MaxTokens+1, err)
	}
	if err := f.CheckTokenCreate(secNow, extra, "User:admin"); !errors.Is(err, backend.ErrTooManyTokens) {
		t.Fatalf("proposer's check: %v", err)
	}
	if len(f.Tokens()) != MaxTokens {
		t.Fatalf("%d tokens after a refusal", len(f.Tokens()))
	}
	// A second later three tokens have expired: room for one, and the
	// expired ones are gone.
	if res := apply(must(EncodeTokenCreate(secNow+1e9, extra, "User:admin"))); reflect.TypeOf(res) != reflect.TypeOf(backend.TokenInfo{}) {
		t.Fatalf("after expiry: %v", res)
	}
	if n := len(f.Tokens()); n != MaxTokens-2 {
		t.Fatalf("%d tokens, want %d", n, MaxTokens-2)
	}
	if _, ok := f.Token(fakeVerifier(0, "", 0, 0).ID); ok {
		t.Fatal("an expired token was kept")
	}

	var acls []auth.ACL
	for i := range MaxACLs {
		acls = append(acls, acl("User:u", auth.ResourceTopic, auth.PatternLiteral, fmt.Sprintf("t%d", i), auth.OpRead, auth.Allow))
	}
	if res := apply(must(EncodeACLCreate(secNow, acls))); res != MaxACLs {
		t.Fatalf("%d ACLs: %v", MaxACLs, res)
	}
	one := []auth.ACL{acl("User:u", auth.ResourceTopic, auth.PatternLiteral, "more", auth.OpRead, auth.Allow)}
	if err, _ := apply(must(EncodeACLCreate(secNow, one))).(error); !errors.Is(err, backend.ErrTooManyACLs) {
		t.Fatalf("ACL %d: %v, want backend.ErrTooManyACLs", MaxACLs+1, err)
	}
	if err := f.CheckACLCreate(one); !errors.Is(err, backend.ErrTooManyACLs) {
		t.Fatalf("proposer's check: %v", err)
	}
	// Adding ACLs already present is no growth.
	if res := apply(must(EncodeACLCreate(secNow, acls[:10]))); res != 0 {
		t.Fatalf("re-adding present ACLs at the bound: %v", res)
	}
	if f.ACLs().Len() != MaxACLs || len(*fatals) != 0 {
		t.Fatalf("%d ACLs, fatals %v", f.ACLs().Len(), *fatals)
	}
}

// TestSecuritySnapshot: tokens and ACLs survive a snapshot and its restore;
// a snapshot without them (an older build's) restores none; the section's
// format is pinned by a literal snapshot.
func TestSecuritySnapshot(t *testing.T) {
	must := mustEncode(t)
	f, _ := testFSM(t, t.TempDir())
	tok, alice := realVerifier(t, "User:alice", secNowMs)
	bob := fakeVerifier(2, "User:bob", 1, secNowMs+10)
	acls := []auth.ACL{
		acl("User:alice", auth.ResourceTopic, auth.PatternPrefix, "billing.", auth.OpWrite, auth.Allow),
		acl("*", auth.ResourceGroup, auth.PatternLiteral, "*", auth.OpAll, auth.Deny),
	}
	f.ApplyBatch(entries(
		createCmd(t, "orders", 1, secNow),
		must(EncodeTokenCreate(secNow, alice, "User:admin")),
		must(EncodeTokenCreate(secNow, bob, "User:admin")),
		must(EncodeACLCreate(secNow, acls)),
	))
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := persist(t, snap)
	raw := sink.String()

	f2, fatals := testFSM(t, t.TempDir())
	f2.ApplyBatch(entries(must(EncodeACLCreate(secNow, []auth.ACL{acl("User:x", auth.ResourceTopic, auth.PatternLiteral, "x", auth.OpRead, auth.Allow)}))))
	if err := f2.Restore(strings.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f2.Tokens(), f.Tokens()) || !reflect.DeepEqual(f2.ACLs().ACLs(), acls) {
		t.Fatalf("restored tokens %+v, ACLs %v", f2.Tokens(), f2.ACLs().ACLs())
	}
	if v, ok := f2.Token(alice.ID); !ok || !v.Check(tok, secNowMs) {
		t.Fatal("alice's token does not check after the restore")
	}
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}

	// A snapshot without the section empties the state.
	if err := f2.Restore(strings.NewReader(`{"version":2,"index":5,"now":1,"topics":null}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if f2.ACLs() == nil || f2.ACLs().Len() != 0 || len(f2.Tokens()) != 0 {
		t.Fatalf("after an older snapshot: %d ACLs, %d tokens", f2.ACLs().Len(), len(f2.Tokens()))
	}

	// The pinned format: a literal section restores as written.
	pinned := `{"version":2,"index":9,"now":1,"topics":null,"security":{"version":1,` +
		`"tokens":[{"verifier":{"id":"0000000000000002","principal":"User:bob","created_ms":1,"expires_ms":1700000000010,` +
		`"sha256":"AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=","scram":{"salt":"AQIDBA==","iterations":4096,` +
		`"stored_key":"AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=","server_key":"AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI="}},"created_by":"User:admin"}],` +
		`"acls":[{"principal":"*","resource":"group","pattern":"literal","name":"*","operation":"all","effect":"deny"}]}}` + "\n"
	if err := f2.Restore(strings.NewReader(pinned)); err != nil {
		t.Fatal(err)
	}
	if v, ok := f2.Token(bob.ID); !ok || !reflect.DeepEqual(v, bob) || !reflect.DeepEqual(f2.ACLs().ACLs(), acls[1:]) {
		t.Fatalf("pinned snapshot: token %+v, ACLs %v", v, f2.ACLs().ACLs())
	}
	if !strings.Contains(raw, pinned[strings.Index(pinned, `{"verifier":{"id":"0000000000000002"`):strings.Index(pinned, `],"acls"`)]) {
		t.Fatalf("this build no longer writes the pinned token record:\n%s", raw)
	}

	// A damaged section is refused and changes nothing.
	for name, s := range map[string]string{
		"version":   `{"version":2,"index":9,"now":1,"topics":null,"security":{"version":2}}`,
		"bad ACL":   `{"version":2,"index":9,"now":1,"topics":null,"security":{"version":1,"acls":[{"principal":"*"}]}}`,
		"bad token": `{"version":2,"index":9,"now":1,"topics":null,"security":{"version":1,"tokens":[{"verifier":{"id":"x"}}]}}`,
	} {
		if err := f2.Restore(strings.NewReader(s + "\n")); err == nil {
			t.Errorf("%s: restored", name)
		}
	}
	if _, ok := f2.Token(bob.ID); !ok {
		t.Fatal("a refused restore changed the tokens")
	}
}

// TestSecurityEntryLevel: every security command needs SecurityLevel, so a
// node proposes none while a member's build predates them.
func TestSecurityEntryLevel(t *testing.T) {
	must := mustEncode(t)
	v := fakeVerifier(1, "User:a", 1, 0)
	a := []auth.ACL{acl("*", auth.ResourceTopic, auth.PatternLiteral, "a", auth.OpRead, auth.Allow)}
	for name, data := range map[string][]byte{
		"token-create": must(EncodeTokenCreate(secNow, v, "User:a")),
		"token-revoke": must(EncodeTokenRevoke(secNow, v.ID)),
		"acl-create":   must(EncodeACLCreate(secNow, a)),
		"acl-delete":   must(EncodeACLDelete(secNow, auth.Filter{Name: "a"})),
	} {
		level, kind, err := EntryLevel(sealEntry(data))
		if err != nil || level != SecurityLevel || kind != name {
			t.Errorf("%s: level %d, kind %s, %v", name, level, kind, err)
		}
	}
}

// TestSecurityReadsConcurrent: front ends read tokens and ACLs on other
// goroutines while changes are applied, without locks or allocation.
func TestSecurityReadsConcurrent(t *testing.T) {
	must := mustEncode(t)
	f, _ := testFSM(t, t.TempDir())
	v := fakeVerifier(7, "User:a", 1, 0)
	f.ApplyBatch(entries(must(EncodeTokenCreate(secNow, v, "User:a"))))
	p, perm := auth.User("a"), auth.Permission{Op: auth.OpRead, Resource: auth.ResourceTopic, Name: "t"}
	if n := testing.AllocsPerRun(100, func() {
		f.ACLs().Authorize(p, perm)
		f.Token(v.ID)
	}); n != 0 {
		t.Fatalf("a read allocates %v times", n)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				f.ACLs().Authorize(p, perm)
				if _, ok := f.Token(v.ID); !ok {
					t.Error("token lost")
					return
				}
			}
		})
	}
	a := []auth.ACL{acl("User:a", auth.ResourceTopic, auth.PatternLiteral, "t", auth.OpRead, auth.Allow)}
	idx := uint64(1)
	for i := range 200 {
		idx++
		cmd := must(EncodeACLCreate(secNow, a))
		if i%2 == 1 {
			cmd = must(EncodeACLDelete(secNow, auth.Filter{Name: "t"}))
		}
		f.apply(Entry{Index: idx, Command: true, Data: cmd})
	}
	close(stop)
	wg.Wait()
}
