package peer

import (
	"bytes"
	"errors"
	"net/http"
	"testing"
	"time"
)

// TestRequestProof: a signed request proves its node under the secret it
// was signed with, at times within the window; another secret, another
// request, a time outside the window and a missing or broken header are
// ErrProof.
func TestRequestProof(t *testing.T) {
	secret, other := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	now := time.UnixMilli(1_800_000_000_000)
	signed := func() *http.Request {
		r, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:7070/internal/v1/segment/data?topic=t&bytes=10", nil)
		if err != nil {
			t.Fatal(err)
		}
		SignRequest(r, "n2", secret, now)
		return r
	}
	if id, err := VerifyRequest(signed(), secret, now.Add(ProofWindow-time.Second)); err != nil || id != "n2" {
		t.Fatalf("a signed request: %q, %v; want n2", id, err)
	}
	for _, tc := range []struct {
		name string
		req  func() *http.Request
		key  []byte
		at   time.Time
	}{
		{"another secret", signed, other, now},
		{"too late", signed, secret, now.Add(ProofWindow + time.Second)},
		{"too early", signed, secret, now.Add(-ProofWindow - time.Second)},
		{"another request", func() *http.Request { r := signed(); r.URL.RawQuery = "topic=t&bytes=99999"; return r }, secret, now},
		{"another node", func() *http.Request {
			r := signed()
			h := r.Header.Get(ProofHeader)
			r.Header.Set(ProofHeader, "v1 n3"+h[len("v1 n2"):])
			return r
		}, secret, now},
		{"no header", func() *http.Request { r := signed(); r.Header.Del(ProofHeader); return r }, secret, now},
		{"a broken header", func() *http.Request { r := signed(); r.Header.Set(ProofHeader, "v1 n2 x"); return r }, secret, now},
	} {
		if _, err := VerifyRequest(tc.req(), tc.key, tc.at); !errors.Is(err, ErrProof) {
			t.Errorf("%s: %v, want ErrProof", tc.name, err)
		}
	}
}
