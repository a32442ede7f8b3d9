package queue

import (
	"encoding/binary"
	"time"
)

// backoff returns the delay before a record is offered again after its
// delivery-th delivery (1-based) failed transiently: capped exponential with
// full jitter, uniform in [0, min(max, base·2^(delivery-1))].
//
// The jitter is a hash of (seed, partition, offset, delivery), not a random
// draw, so every replica computes the same delay from the same command
// (Apply must be deterministic), while different records and attempts still
// spread out.
func backoff(base, max time.Duration, seed uint64, partition int32, offset int64, delivery uint32) time.Duration {
	if base <= 0 || max <= 0 {
		return 0
	}
	ceiling := max
	if shift := int(delivery) - 1; shift < 62 {
		if shift < 0 {
			shift = 0
		}
		if c := base << shift; c>>shift == base && c > 0 && c < max {
			ceiling = c
		}
	}
	h := leaseMix(seed ^ leaseMix(uint64(uint32(partition))<<32|uint64(delivery)) ^ leaseMix(uint64(offset)+0x9e3779b97f4a7c15))
	return time.Duration(h % (uint64(ceiling) + 1))
}

// leaseMix is splitmix64's finalizer: a fast, well-spread 64-bit hash.
func leaseMix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// backoffSeed derives a group's jitter seed from its secret.
func backoffSeed(secret []byte) uint64 {
	var b [8]byte
	copy(b[:], secret)
	return binary.BigEndian.Uint64(b[:])
}
