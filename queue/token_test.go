package queue

import (
	"fmt"
	"math"
	"testing"
)

func TestTokenRoundTrip(t *testing.T) {
	tok := Token{Partition: 7, Offset: 1 << 40, Delivery: 3, Tag: 0xdeadbeef}
	got, err := ParseToken(tok.String())
	if err != nil || got != tok {
		t.Fatalf("ParseToken(%q) = %v, %v; want %v", tok.String(), got, err, tok)
	}
	for _, bad := range []string{"", "1.2.3", "1.2.3.4", "-1.2.3.00000000deadbeef", "1.2.0.00000000deadbeef", "a.2.3.00000000deadbeef", "1.2.3.00000000deadbeefX"} {
		if _, err := ParseToken(bad); err == nil {
			t.Errorf("ParseToken(%q) succeeded", bad)
		}
	}
}

func TestTokensDifferPerDelivery(t *testing.T) {
	secret := []byte("s")
	a := leaseTag(secret, 10, 0, 5, 1)
	if b := leaseTag(secret, 11, 0, 5, 2); a == b {
		t.Fatal("two deliveries share a tag")
	}
	if c := leaseTag([]byte("other"), 10, 0, 5, 1); a == c {
		t.Fatal("tag does not depend on the group secret")
	}
}

// TestTokenTextForm checks the text form against its definition
// (partition.offset.delivery.tag, the tag in 16 lower-case hex digits) and
// that parsing it gives the token back.
func TestTokenTextForm(t *testing.T) {
	tests := []struct {
		name string
		tok  Token
	}{
		{name: "zero", tok: Token{}},
		{name: "small", tok: Token{Partition: 3, Offset: 1234567, Delivery: 1, Tag: 0x0123456789abcdef}},
		{name: "largest", tok: Token{Partition: math.MaxInt32, Offset: math.MaxInt64, Delivery: math.MaxUint32, Tag: math.MaxUint64}},
		{name: "tag with leading zeros", tok: Token{Partition: 0, Offset: 9, Delivery: 2, Tag: 0xf}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := fmt.Sprintf("%d.%d.%d.%016x", tt.tok.Partition, tt.tok.Offset, tt.tok.Delivery, tt.tok.Tag)
			if got := tt.tok.String(); got != want {
				t.Fatalf("String() = %q, want %q", got, want)
			}
			if got := string(tt.tok.Append([]byte("x"))); got != "x"+want {
				t.Fatalf("Append = %q, want %q", got, "x"+want)
			}
			if tt.tok.Delivery == 0 {
				return // not a delivery: refused by ParseToken
			}
			got, err := ParseToken(want)
			if err != nil || got != tt.tok {
				t.Fatalf("ParseToken(%q) = %v, %v; want %v", want, got, err, tt.tok)
			}
		})
	}
}

// TestParseTokenForms checks that the fast path and the general rule
// agree on forms near the canonical one.
func TestParseTokenForms(t *testing.T) {
	for _, s := range []string{
		"1.2.3.00000000deadbeef", "01.002.3.00000000deadbeef", "+1.2.3.00000000deadbeef", "1.2.3.00000000DEADBEEF",
		"2147483647.2.3.00000000deadbeef", "2147483648.2.3.00000000deadbeef", "1.9223372036854775807.3.00000000deadbeef",
		"1.9223372036854775808.3.00000000deadbeef", "1.2.4294967295.00000000deadbeef", "1.2.4294967296.00000000deadbeef",
		"1.2.0.00000000deadbeef", "1..3.00000000deadbeef", ".1.2.00000000deadbeef", "1.2.3.0000000deadbeef",
		"1.2.3.00000000deadbeefa", "1.2.3.4.00000000deadbeef", "1.2.3", "1.2.3.", "1.2.3.0x000000deadbeef",
		"00000000000000000001.2.3.00000000deadbeef", "1.2.3.00000000deadbeeg", "-0.2.3.00000000deadbeef",
	} {
		fast, ok := parseCanonicalToken(s)
		slow, err := parseTokenFields(s)
		if ok && (err != nil || fast != slow) {
			t.Errorf("%q: fast path %v, general rule %v, %v", s, fast, slow, err)
		}
		got, gotErr := ParseToken(s)
		if got != slow || (gotErr == nil) != (err == nil) {
			t.Errorf("ParseToken(%q) = %v, %v; general rule %v, %v", s, got, gotErr, slow, err)
		}
	}
}

// FuzzParseToken checks that ParseToken reads every input as the general
// rule does.
func FuzzParseToken(f *testing.F) {
	f.Add("7.1099511627776.3.00000000deadbeef")
	f.Add("1.2.3.00000000DEADBEEF")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseToken(s)
		want, wantErr := parseTokenFields(s)
		if got != want || (err == nil) != (wantErr == nil) {
			t.Fatalf("ParseToken(%q) = %v, %v; general rule %v, %v", s, got, err, want, wantErr)
		}
	})
}

func BenchmarkToken(b *testing.B) {
	tok := Token{Partition: 3, Offset: 1234567, Delivery: 1, Tag: 0x0123456789abcdef}
	s := tok.String()
	b.Run("String", func(b *testing.B) {
		for b.Loop() {
			_ = tok.String()
		}
	})
	b.Run("Parse", func(b *testing.B) {
		for b.Loop() {
			if _, err := ParseToken(s); err != nil {
				b.Fatal(err)
			}
		}
	})
}
