package queue

import "testing"

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
