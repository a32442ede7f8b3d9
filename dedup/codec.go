package dedup

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"

	"github.com/logd-dev/logd/internal/varint"
)

// encodingVersion prefixes a window's encoding (View.WriteTo,
// ReadWindow): the version, the key count as a uvarint, then per key,
// oldest first, its length as a uvarint and its bytes, the digest, and
// partition, offset and expiry as varints.
const encodingVersion = 1

func appendKey[T string | []byte](b []byte, key T, e Entry) []byte {
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = append(b, e.Digest[:]...)
	b = binary.AppendVarint(b, int64(e.Partition))
	b = binary.AppendVarint(b, e.Offset)
	return binary.AppendVarint(b, e.Expires)
}

// appendKeys appends the live keys of sequences [from, to).
func (g *ring) appendKeys(b []byte, from, to uint64) []byte {
	for s := from; s < to; s++ {
		if r := g.rec(s); !r.dead {
			b = appendKey(b, g.keyBytes(r), r.Entry)
		}
	}
	return b
}

// encodedLen is the length of the ring's encoding (View.WriteTo).
func (g *ring) encodedLen() int64 {
	n := int64(1 + varint.UvarintLen(uint64(g.count)))
	for s := g.head; s < g.tail; s++ {
		if r := g.rec(s); !r.dead {
			n += int64(varint.UvarintLen(uint64(r.keyLen))) + int64(r.keyLen) + int64(len(r.Digest)) +
				int64(varint.VarintLen(int64(r.Partition))+varint.VarintLen(r.Offset)+varint.VarintLen(r.Expires))
		}
	}
	return n
}

// Len is the length of the view's encoding: what WriteTo writes.
func (v *View) Len() int64 { return v.g.encodedLen() }

// WriteTo writes the view's encoding (encodingVersion), through a small
// buffer, so a window of millions of keys needs no buffer of its size.
func (v *View) WriteTo(dst io.Writer) (int64, error) {
	buf := make([]byte, 0, 64<<10)
	buf = append(buf, encodingVersion)
	buf = binary.AppendUvarint(buf, uint64(v.g.count))
	var n int64
	for s := v.g.head; ; {
		to := min(v.g.tail, s+64)
		buf = v.g.appendKeys(buf, s, to)
		s = to
		if len(buf) < 32<<10 && s < v.g.tail {
			continue
		}
		m, err := dst.Write(buf)
		n += int64(m)
		if err != nil {
			return n, fmt.Errorf("write idempotency window: %w", err)
		}
		if s == v.g.tail {
			return n, nil
		}
		buf = buf[:0]
	}
}

// ReadWindow decodes n bytes of a window's encoding from r straight
// into a new window holding at most maxKeys keys, so restoring a snapshot
// holds neither the section nor a table of its keys in memory (a window of
// millions of keys would need both at once, besides the window). n = 0 is
// an empty window.
func ReadWindow(r io.Reader, n int64, maxKeys int) (*Window, error) {
	w := NewWindow(maxKeys)
	if n == 0 {
		return w, nil
	}
	err := decode(r, n, func(key []byte, e Entry) {
		w.insertLocked(string(key), maphash.Bytes(w.seed, key)&w.hashMask, e)
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// decode reads exactly n bytes of a window's encoding from r and
// calls fn for each key, oldest first; key is valid only during the call.
// A short or malformed encoding is ErrBadEncoding; a failing r, its
// error.
func decode(r io.Reader, n int64, fn func(key []byte, e Entry)) error {
	cr := &countingReader{r: bufio.NewReaderSize(io.LimitReader(r, n), 64<<10)}
	// A failing reader is reported as such; anything else that stops the
	// decoding (a short section, a varint overflowing 64 bits, a length
	// past the section) is a damaged encoding.
	bad := func(what string, i uint64) error {
		if cr.err != nil {
			return fmt.Errorf("read idempotency window: %w", cr.err)
		}
		return fmt.Errorf("%w: %s %d", ErrBadEncoding, what, i)
	}
	v, err := cr.ReadByte()
	if err != nil {
		return bad("version", 0)
	}
	if v != encodingVersion {
		return fmt.Errorf("%w: version %d", ErrBadEncoding, v)
	}
	count, err := binary.ReadUvarint(cr)
	if err != nil || count > uint64(n) {
		return bad("key count", count)
	}
	var key []byte
	for i := uint64(0); i < count; i++ {
		kl, err := binary.ReadUvarint(cr)
		if err != nil || kl > uint64(n-cr.n) {
			return bad("key", i)
		}
		key = slices.Grow(key[:0], int(kl))[:kl]
		if _, err := io.ReadFull(cr, key); err != nil {
			return bad("key", i)
		}
		var e Entry
		if _, err := io.ReadFull(cr, e.Digest[:]); err != nil {
			return bad("digest", i)
		}
		var vals [3]int64
		for j := range vals {
			if vals[j], err = binary.ReadVarint(cr); err != nil {
				return bad("entry", i)
			}
		}
		e.Partition, e.Offset, e.Expires = int32(vals[0]), vals[1], vals[2]
		fn(key, e)
	}
	if cr.n != n {
		return fmt.Errorf("%w: %d trailing bytes", ErrBadEncoding, n-cr.n)
	}
	return nil
}

// countingReader counts the bytes read through it and keeps the reader's
// first failure other than the section's end.
type countingReader struct {
	r   *bufio.Reader
	n   int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	m, err := c.r.Read(p)
	c.n += int64(m)
	c.failed(err)
	return m, err
}

func (c *countingReader) failed(err error) {
	if err != nil && c.err == nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		c.err = err
	}
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	c.failed(err)
	return b, err
}
