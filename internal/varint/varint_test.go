package varint

import (
	"encoding/binary"
	"math"
	"testing"
)

func TestLengthsMatchEncoding(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, -64, 64, -65, 127, 128, 1 << 20, -(1 << 20), math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64} {
		if got, want := VarintLen(v), len(binary.AppendVarint(nil, v)); got != want {
			t.Errorf("VarintLen(%d) = %d, want %d", v, got, want)
		}
		if got, want := UvarintLen(uint64(v)), len(binary.AppendUvarint(nil, uint64(v))); got != want {
			t.Errorf("UvarintLen(%d) = %d, want %d", uint64(v), got, want)
		}
	}
}
