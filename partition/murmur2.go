package partition

// Murmur2 is Kafka's murmur2 hash (org.apache.kafka.common.utils.Utils.murmur2,
// seed 0x9747b28c), bit for bit, including its handling of the trailing 1-3
// bytes. Java's int arithmetic is reproduced with uint32.
func Murmur2(b []byte) int32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	n := len(b)
	h := uint32(seed) ^ uint32(n)
	for i := 0; i+4 <= n; i += 4 {
		k := uint32(b[i]) | uint32(b[i+1])<<8 | uint32(b[i+2])<<16 | uint32(b[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := b[n&^3:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// ForKey returns the partition of a keyed record under Kafka's default
// partitioner: toPositive(murmur2(key)) % numPartitions, where toPositive
// clears the sign bit (it is not an absolute value). A nil key hashes like an
// empty one; Kafka places keyless records differently (see the package
// documentation). It returns -1, never a valid partition, if numPartitions
// is not positive.
func ForKey(key []byte, numPartitions int32) int32 {
	if numPartitions <= 0 {
		return -1
	}
	return (Murmur2(key) & 0x7fffffff) % numPartitions
}
