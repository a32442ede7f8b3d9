// Package varint sizes the base-128 integers of encoding/binary (also
// Kafka's varint and varlong) without writing them.
package varint

import "math/bits"

// UvarintLen is the length of v as binary.AppendUvarint writes it.
func UvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// VarintLen is the length of v as binary.AppendVarint writes it
// (zigzag-encoded).
func VarintLen(v int64) int { return UvarintLen(uint64(v<<1) ^ uint64(v>>63)) }
