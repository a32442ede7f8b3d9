package outbox

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"time"
)

// idLen is the length of an id: 128 bits in Crockford's base32.
const idLen = 26

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// idGen makes ids that sort in creation order: 48 bits of Unix
// milliseconds, then 80 bits that are random for the first id of a
// millisecond and incremented for the next ones, so ids made by one
// generator never go backwards even within a millisecond, and a clock
// that steps back does not reorder them either.
type idGen struct {
	mu   sync.Mutex
	ms   uint64   // guarded by mu: the millisecond of last
	last [10]byte // guarded by mu: the 80 low bits of the last id
}

func (g *idGen) next(now time.Time) string {
	ms := uint64(now.UnixMilli())
	g.mu.Lock()
	defer g.mu.Unlock()
	if ms <= g.ms && g.ms != 0 {
		ms = g.ms
		if !incr(g.last[:]) { // 2^80 ids in one millisecond: take the next
			ms++
			rand.Read(g.last[:])
		}
	} else {
		rand.Read(g.last[:])
		// Leave room to increment without overflow in practice.
		g.last[0] &= 0x7f
	}
	g.ms = ms
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], ms<<16)
	copy(b[6:], g.last[:])
	return encodeID(b)
}

func incr(b []byte) bool {
	for i := len(b) - 1; i >= 0; i-- {
		b[i]++
		if b[i] != 0 {
			return true
		}
	}
	return false
}

// encodeID writes 128 bits as 26 base32 digits, the first holding 3 bits.
func encodeID(b [16]byte) string {
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	var out [idLen]byte
	for i := idLen - 1; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

// ValidID reports whether s is an outbox id: 26 upper-case Crockford
// base32 digits, the first at most 7.
func ValidID(s string) bool {
	if len(s) != idLen || s[0] > '7' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' && c != 'I' && c != 'L' && c != 'O' && c != 'U') {
			return false
		}
	}
	return true
}

// IDTime returns the creation time an id holds.
func IDTime(id string) (time.Time, error) {
	if !ValidID(id) {
		return time.Time{}, fmt.Errorf("%w: id %q", ErrBadMessage, id)
	}
	var ms uint64
	for i := 0; i < 10; i++ { // the first 10 digits hold 50 bits: 2 zero, then 48 of time
		ms = ms<<5 | uint64(indexCrockford(id[i]))
	}
	return time.UnixMilli(int64(ms)), nil
}

func indexCrockford(c byte) int {
	for i := 0; i < len(crockford); i++ {
		if crockford[i] == c {
			return i
		}
	}
	return 0
}
