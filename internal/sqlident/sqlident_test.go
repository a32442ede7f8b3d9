package sqlident

import "testing"

func TestValid(t *testing.T) {
	for _, c := range []struct {
		name string
		max  int
		want bool
	}{
		{"outbox", 63, true},
		{"_t1", 63, true},
		{"T_2x", 4, true},
		{"T_2xy", 4, false},
		{"", 63, false},
		{"1table", 63, false},
		{"a-b", 63, false},
		{"a b", 63, false},
		{"x;drop", 63, false},
		{"é", 63, false},
		{`a"b`, 63, false},
	} {
		if got := Valid(c.name, c.max); got != c.want {
			t.Errorf("Valid(%q, %d) = %v, want %v", c.name, c.max, got, c.want)
		}
	}
}
