package partition

import (
	"testing"
)

func TestMurmur2(t *testing.T) {
	tests := []struct {
		in   string
		want int32
	}{
		// Kafka's UtilsTest.testMurmur2.
		{in: "21", want: -973932308},
		{in: "foobar", want: -790332482},
		{in: "a-little-bit-long-string", want: -985981536},
		{in: "a-little-bit-longer-string", want: -1486304829},
		{in: "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", want: -58897971},
		{in: "abc", want: 479470107},
		// Akka's Murmur2Spec, taken from Kafka's implementation: every tail
		// length (0-3 trailing bytes) and a full block.
		{in: "1", want: -1993445489},
		{in: "12", want: 126087238},
		{in: "123", want: -267702483},
		{in: "1234", want: -1614185708},
		{in: "12345", want: -1188365604},
	}
	for _, tt := range tests {
		if got := Murmur2([]byte(tt.in)); got != tt.want {
			t.Errorf("Murmur2(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestForKey(t *testing.T) {
	// kafka-python's test_murmur2_java_compatibility, checked there against
	// Kafka's Java partitioner with 1000 partitions.
	tests := []struct {
		key  string
		want int32
	}{
		{key: "", want: 681},
		{key: "a", want: 524},
		{key: "ab", want: 434},
		{key: "abc", want: 107},
		{key: "123456789", want: 566},
		{key: "\x00 ", want: 742},
	}
	for _, tt := range tests {
		if got := ForKey([]byte(tt.key), 1000); got != tt.want {
			t.Errorf("ForKey(%q, 1000) = %d, want %d", tt.key, got, tt.want)
		}
	}

	// toPositive masks the sign bit; it is not Math.abs. "foobar" hashes to
	// -790332482: masked 1357151166, so partition 1357151166 % 7 = 0 (abs
	// would give 790332482 % 7 = 2).
	if got := ForKey([]byte("foobar"), 7); got != 0 {
		t.Errorf("ForKey(foobar, 7) = %d, want 0", got)
	}
	if got := ForKey(nil, 1000); got != 681 {
		t.Errorf("ForKey(nil) = %d, want the empty key's 681", got)
	}
	for _, n := range []int32{0, -1} {
		if got := ForKey([]byte("k"), n); got != -1 {
			t.Errorf("ForKey(k, %d) = %d, want -1", n, got)
		}
	}
	for i := range 1000 {
		key := []byte{byte(i), byte(i >> 8), 0xff}
		if got := ForKey(key, 12); got < 0 || got >= 12 {
			t.Fatalf("ForKey(%x, 12) = %d out of range", key, got)
		}
	}
}

func BenchmarkMurmur2(b *testing.B) {
	key := []byte("user-0123456789abcdef")
	b.SetBytes(int64(len(key)))
	for b.Loop() {
		Murmur2(key)
	}
}
