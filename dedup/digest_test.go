package dedup

import (
	"fmt"
	"testing"
)

// recordDigest is the Digest of one record's payload.
func recordDigest(key, value []byte, headers func(yield func(k string, v []byte) bool)) Digest {
	return NewDigester().Digest(key, value, headers)
}

func TestDigest(t *testing.T) {
	hs := func(kv ...string) func(func(string, []byte) bool) {
		return func(yield func(string, []byte) bool) {
			for i := 0; i+1 < len(kv); i += 2 {
				if !yield(kv[i], []byte(kv[i+1])) {
					return
				}
			}
		}
	}
	base := recordDigest([]byte("k"), []byte("v"), hs("h", "1"))
	for name, d := range map[string]Digest{
		"null key":      recordDigest(nil, []byte("v"), hs("h", "1")),
		"empty key":     recordDigest([]byte{}, []byte("v"), hs("h", "1")),
		"other value":   recordDigest([]byte("k"), []byte("w"), hs("h", "1")),
		"null value":    recordDigest([]byte("k"), nil, hs("h", "1")),
		"no headers":    recordDigest([]byte("k"), []byte("v"), nil),
		"header value":  recordDigest([]byte("k"), []byte("v"), hs("h", "2")),
		"shifted bytes": recordDigest([]byte("kv"), []byte(""), hs("h", "1")),
	} {
		if d == base {
			t.Errorf("%s: same digest as the base record", name)
		}
	}
	if recordDigest([]byte("k"), []byte("v"), hs("h", "1")) != base {
		t.Fatal("digest is not deterministic")
	}
	// Digests are kept in snapshots and compared with digests computed by
	// other nodes and versions: the algorithm (XXH3-128 over the framed
	// fields) must never change.
	if got := fmt.Sprintf("%x", base); got != "b206f61403084de28f19116dc0dfccc1" {
		t.Fatalf("digest %s: the algorithm changed", got)
	}
}

// BenchmarkDigest digests a 128-byte value with a 16-byte key and one
// header, as the server does for every keyed record.
func BenchmarkDigest(b *testing.B) {
	dg := NewDigester()
	key, value := []byte("customer-0000042"), make([]byte, 128)
	headers := func(yield func(string, []byte) bool) { yield("trace", []byte("0af7651916cd43dd")) }
	b.SetBytes(int64(len(key) + len(value) + 5 + 16))
	for b.Loop() {
		dg.Digest(key, value, headers)
	}
}
