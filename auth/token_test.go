package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func newTestToken(t testing.TB) (Token, Verifier) {
	t.Helper()
	tok, err := NewToken(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(tok, User("alice"), "ci", 1000, 0, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return tok, v
}

func TestTokenRoundTrip(t *testing.T) {
	tok, v := newTestToken(t)
	s := tok.String()
	if !strings.HasPrefix(s, TokenPrefix) {
		t.Fatalf("token %q lacks its prefix", s)
	}
	back, err := ParseToken(s)
	if err != nil || back != tok {
		t.Fatalf("ParseToken = %+v, %v", back, err)
	}
	if !v.Check(back, 2000) {
		t.Fatal("the token does not check against its verifier")
	}
	if bytes.Contains(mustJSON(t, v), []byte(tok.Secret)) {
		t.Fatal("the verifier's encoding contains the secret")
	}
}

func TestVerifierRefuses(t *testing.T) {
	tok, v := newTestToken(t)
	other, _ := newTestToken(t)
	if v.Check(other, 2000) {
		t.Fatal("another token checks")
	}
	forged := Token{ID: tok.ID, Secret: other.Secret}
	if v.Check(forged, 2000) {
		t.Fatal("the right id with another secret checks")
	}
	moved := Token{ID: other.ID, Secret: tok.Secret}
	if v.Check(moved, 2000) {
		t.Fatal("the right secret under another id checks")
	}
	v.ExpiresMs = 5000
	if !v.Check(tok, 4999) || v.Check(tok, 5000) {
		t.Fatal("expiry is not at ExpiresMs")
	}
}

func TestParseTokenRefuses(t *testing.T) {
	tok, _ := newTestToken(t)
	for _, s := range []string{
		"", "logd_", tok.ID + "." + tok.Secret, TokenPrefix + tok.ID, TokenPrefix + tok.ID + ".",
		TokenPrefix + strings.ToUpper(tok.ID) + "." + tok.Secret, TokenPrefix + tok.ID[1:] + "." + tok.Secret,
		TokenPrefix + tok.ID + "." + tok.Secret + "A", TokenPrefix + tok.ID + "." + tok.Secret[1:] + "!",
	} {
		if _, err := ParseToken(s); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("ParseToken(%q) = %v, want ErrInvalidToken", s, err)
		}
	}
}

// TestSCRAMKeys checks the stored keys against a client proof built the
// way RFC 5802 says a client builds it from the secret.
func TestSCRAMKeys(t *testing.T) {
	tok, v := newTestToken(t)
	salted, err := pbkdf2.Key(sha256.New, tok.Secret, v.SCRAM.Salt, v.SCRAM.Iterations, sha256.Size)
	if err != nil {
		t.Fatal(err)
	}
	clientKey := hmacSHA256(salted, "Client Key")
	authMessage := "n=alice,r=abc,r=abcdef,s=salt,i=4096,c=biws,r=abcdef"
	sig := hmac.New(sha256.New, v.SCRAM.StoredKey)
	sig.Write([]byte(authMessage))
	clientSig := sig.Sum(nil)
	proof := make([]byte, len(clientKey))
	for i := range proof {
		proof[i] = clientKey[i] ^ clientSig[i]
	}
	// The server's side: recover the client key from the proof and compare
	// its hash with the stored key.
	recovered := make([]byte, len(proof))
	for i := range proof {
		recovered[i] = proof[i] ^ clientSig[i]
	}
	if h := sha256.Sum256(recovered); !hmac.Equal(h[:], v.SCRAM.StoredKey) {
		t.Fatal("the stored key does not verify the client proof")
	}
	if !hmac.Equal(v.SCRAM.ServerKey, hmacSHA256(salted, "Server Key")) {
		t.Fatal("server key mismatch")
	}
}

func TestVerifierValidate(t *testing.T) {
	_, good := newTestToken(t)
	bad := map[string]func(v *Verifier){
		"id":          func(v *Verifier) { v.ID = "xyz" },
		"principal":   func(v *Verifier) { v.Principal = "Group:x" },
		"digest":      func(v *Verifier) { v.SHA256 = v.SHA256[:5] },
		"expiry":      func(v *Verifier) { v.ExpiresMs = v.CreatedMs },
		"negative":    func(v *Verifier) { v.CreatedMs = -1 },
		"iterations":  func(v *Verifier) { v.SCRAM.Iterations = 1 },
		"stored key":  func(v *Verifier) { v.SCRAM.StoredKey = nil },
		"description": func(v *Verifier) { v.Description = strings.Repeat("x", MaxNameLen+1) },
	}
	for name, mut := range bad {
		v := good
		v.SCRAM.StoredKey = append([]byte(nil), good.SCRAM.StoredKey...)
		mut(&v)
		if err := v.Validate(); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s: Validate = %v, want ErrInvalidToken", name, err)
		}
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func BenchmarkVerifierCheck(b *testing.B) {
	tok, v := newTestToken(b)
	b.ReportAllocs()
	for b.Loop() {
		if !v.Check(tok, 2000) {
			b.Fatal("refused")
		}
	}
}
