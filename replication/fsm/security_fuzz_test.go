package fsm

import (
	"errors"
	"reflect"
	"testing"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
)

// The security payload decoders read what a proposer wrote, strictly. Each
// fuzz target checks that a decoder never panics, that what it refuses is
// backend.ErrInvalidArgument (never a reason to stop the node), and that what it
// accepts encodes back to a payload it decodes to the same value and
// applies to a state without panicking.

func fuzzRefusal(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, backend.ErrInvalidArgument) && !errors.Is(err, backend.ErrTooManyACLs) {
		t.Fatalf("refused with %v, want backend.ErrInvalidArgument", err)
	}
}

func FuzzDecodeTokenCreate(f *testing.F) {
	good := mustJSONPayloadF(f, tokenRecord{Verifier: fakeVerifier(1, "User:alice", 1, 2), CreatedBy: "User:admin"})
	f.Add(good)
	f.Add([]byte(`{"verifier":{"id":"0123456789abcdef"},"created_by":"User:a"}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"verifier":null,"created_by":"User:a","x":1}`))
	f.Fuzz(func(t *testing.T, p []byte) {
		r, err := decodeTokenCreate(p)
		if err != nil {
			fuzzRefusal(t, err)
			return
		}
		data, err := EncodeTokenCreate(secNow, r.Verifier, r.CreatedBy)
		if err != nil {
			t.Fatalf("encode of an accepted payload: %v", err)
		}
		back, err := decodeTokenCreate(data[cmdHeaderSize:])
		if err != nil || !reflect.DeepEqual(back, r) {
			t.Fatalf("round trip: %+v, %v; want %+v", back, err, r)
		}
		var s securityState
		if _, err := s.planTokenCreate(r, secNowMs); err != nil {
			t.Fatalf("create on an empty state: %v", err)
		}
	})
}

func FuzzDecodeTokenRevoke(f *testing.F) {
	f.Add([]byte(`{"id":"0123456789abcdef"}`))
	f.Add([]byte(`{"id":"0123456789abcdef"} x`))
	f.Add([]byte(`{"ID":"0123456789abcdef"}`))
	f.Fuzz(func(t *testing.T, p []byte) {
		r, err := decodeTokenRevoke(p)
		if err != nil {
			fuzzRefusal(t, err)
			return
		}
		data, err := EncodeTokenRevoke(secNow, r.ID)
		if err != nil {
			t.Fatalf("encode of an accepted payload: %v", err)
		}
		if back, err := decodeTokenRevoke(data[cmdHeaderSize:]); err != nil || back != r {
			t.Fatalf("round trip: %+v, %v; want %+v", back, err, r)
		}
		var s securityState
		if _, _, err := s.planTokenRevoke(r.ID); !errors.Is(err, backend.ErrUnknownToken) {
			t.Fatalf("revoke on an empty state: %v", err)
		}
	})
}

func FuzzDecodeACLCreate(f *testing.F) {
	f.Add([]byte(`{"acls":[{"principal":"*","resource":"queue","pattern":"prefix","name":"jobs.","operation":"alter","effect":"deny"}]}`))
	f.Add([]byte(`{"acls":[{"principal":"User:a","resource":"cluster","pattern":"literal","name":"logd","operation":"admin","effect":"allow"},{"principal":"User:a","resource":"cluster","pattern":"literal","name":"logd","operation":"admin","effect":"allow"}]}`))
	f.Add([]byte(`{"acls":[{"resource":7}]}`))
	f.Add([]byte(`{"acls":null}`))
	f.Fuzz(func(t *testing.T, p []byte) {
		c, err := decodeACLCreate(p)
		if err != nil {
			fuzzRefusal(t, err)
			return
		}
		data, err := EncodeACLCreate(secNow, c.ACLs)
		if err != nil {
			t.Fatalf("encode of an accepted payload: %v", err)
		}
		if back, err := decodeACLCreate(data[cmdHeaderSize:]); err != nil || !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip: %+v, %v; want %+v", back, err, c)
		}
		var s securityState
		set, added, err := s.planACLCreate(c.ACLs)
		if err != nil || added != set.Len() || added < 1 || added > len(c.ACLs) {
			t.Fatalf("create on an empty state: %d added, %v", added, err)
		}
		set.Authorize(auth.User("alice"), auth.Permission{Op: c.ACLs[0].Operation, Resource: c.ACLs[0].Resource, Name: c.ACLs[0].Name})
	})
}

func FuzzDecodeACLDelete(f *testing.F) {
	f.Add([]byte(`{"filter":{"principal":"User:a","resource":"topic"}}`))
	f.Add([]byte(`{"filter":{"name":"*","operation":"all","effect":"deny","pattern":"prefix"}}`))
	f.Add([]byte(`{"filter":{}}`))
	f.Add([]byte(`{"filter":{"resource":null}}`))
	f.Fuzz(func(t *testing.T, p []byte) {
		flt, err := decodeACLDelete(p)
		if err != nil {
			fuzzRefusal(t, err)
			return
		}
		if flt == (auth.Filter{}) {
			t.Fatal("an empty filter was accepted")
		}
		data, err := EncodeACLDelete(secNow, flt)
		if err != nil {
			t.Fatalf("encode of an accepted payload: %v", err)
		}
		if back, err := decodeACLDelete(data[cmdHeaderSize:]); err != nil || back != flt {
			t.Fatalf("round trip: %+v, %v; want %+v", back, err, flt)
		}
		set, err := auth.NewSet([]auth.ACL{acl("*", auth.ResourceTopic, auth.PatternLiteral, "*", auth.OpAll, auth.Allow)})
		if err != nil {
			t.Fatal(err)
		}
		matchACLs(set, flt)
	})
}

func mustJSONPayloadF(f *testing.F, v any) []byte {
	f.Helper()
	d, err := encodeJSONCommand(CmdTokenCreate, 0, v)
	if err != nil {
		f.Fatal(err)
	}
	return d[cmdHeaderSize:]
}
