package auth

import (
	"encoding/json"
	"testing"
)

// FuzzParseToken: any input either parses into a token whose String gives
// the input back, or is refused; never a panic.
func FuzzParseToken(f *testing.F) {
	f.Add("logd_0123456789abcdef.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	f.Add("logd_.")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseToken(s)
		if err != nil {
			return
		}
		if tok.String() != s {
			t.Fatalf("ParseToken(%q).String() = %q", s, tok.String())
		}
	})
}

// FuzzDecodeACL: a decoded ACL that validates encodes and decodes to
// itself, and a Set built from it authorizes without panicking.
func FuzzDecodeACL(f *testing.F) {
	f.Add([]byte(`{"principal":"*","resource":"queue","pattern":"prefix","name":"jobs.","operation":"alter","effect":"deny"}`))
	f.Add([]byte(`{"principal":"User:a","resource":"cluster","pattern":"literal","name":"logd","operation":"admin","effect":"allow"}`))
	f.Add([]byte(`{"resource":7}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var a ACL
		if err := json.Unmarshal(b, &a); err != nil || a.Validate() != nil {
			return
		}
		enc, err := json.Marshal(a)
		if err != nil {
			t.Fatalf("marshal a valid ACL: %v", err)
		}
		var back ACL
		if err := json.Unmarshal(enc, &back); err != nil || back != a {
			t.Fatalf("round trip of %s: %+v, %v", enc, back, err)
		}
		s, err := NewSet([]ACL{a})
		if err != nil {
			t.Fatalf("NewSet of a valid ACL: %v", err)
		}
		s.Authorize(User("alice"), Permission{OpRead, a.Resource, a.Name})
	})
}

// FuzzDecodeVerifier: decoding never panics, and a verifier that validates
// round-trips.
func FuzzDecodeVerifier(f *testing.F) {
	f.Add([]byte(`{"id":"0123456789abcdef","principal":"User:a","created_ms":1,"sha256":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","scram":{"salt":"AAAA","iterations":4096,"stored_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","server_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var v Verifier
		if err := json.Unmarshal(b, &v); err != nil || v.Validate() != nil {
			return
		}
		enc, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var back Verifier
		if err := json.Unmarshal(enc, &back); err != nil || back.Validate() != nil {
			t.Fatalf("round trip of %s: %v", enc, err)
		}
		back.Check(Token{ID: v.ID, Secret: "x"}, 0)
	})
}
