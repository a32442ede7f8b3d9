package clienttest

import "testing"

// Vectors from Kafka's UtilsTest.testMurmur2.
func TestMurmur2(t *testing.T) {
	tests := []struct {
		in   string
		want int32
	}{
		{in: "21", want: -973932308},
		{in: "foobar", want: -790332482},
		{in: "a-little-bit-long-string", want: -985981536},
		{in: "a-little-bit-longer-string", want: -1486304829},
		{in: "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", want: -58897971},
		{in: "abc", want: 479470107},
	}
	for _, tt := range tests {
		if got := int32(murmur2([]byte(tt.in))); got != tt.want {
			t.Errorf("murmur2(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
