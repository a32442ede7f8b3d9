package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The framing of the Kafka protocol: every request and response is a
// big-endian int32 size followed by that many bytes. A request starts with
// its header (api key, api version, correlation id, a nullable client id,
// and in a flexible version a tagged-field section); a response with the
// correlation id, plus an empty tagged-field section when the response is
// flexible, except ApiVersions', which never has one (KIP-511: a client
// must read it before it knows the broker's versions).

// Keys of the requests this front end serves.
const (
	keyProduce                 int16 = 0
	keyFetch                   int16 = 1
	keyListOffsets             int16 = 2
	keyMetadata                int16 = 3
	keySaslHandshake           int16 = 17
	keyApiVersions             int16 = 18
	keyCreateTopics            int16 = 19
	keyDeleteTopics            int16 = 20
	keyDescribeConfigs         int16 = 32
	keyAlterConfigs            int16 = 33
	keyIncrementalAlterConfigs int16 = 44
)

// minRequestBytes is the shortest request header: key, version and
// correlation id, and a client id's length.
const minRequestBytes = 10

// requestHeader is a request's header.
type requestHeader struct {
	key, version  int16
	correlationID int32
	// clientID is the client's id, "" when null.
	clientID string
}

// errMalformed marks a request that cannot be parsed: Kafka closes the
// connection, and so does this front end.
var errMalformed = errors.New("kafka: malformed request")

// parseHeader reads the header at the start of a request (without its size
// prefix) and returns it with the body. flexible reports whether the key's
// version has a tagged-field section in its header, which the caller knows
// from kmsg (a version this front end does not serve is not parsed past
// its correlation id).
func parseHeader(b []byte) (requestHeader, []byte, error) {
	if len(b) < minRequestBytes {
		return requestHeader{}, nil, fmt.Errorf("%w: %d-byte request", errMalformed, len(b))
	}
	h := requestHeader{
		key:           int16(binary.BigEndian.Uint16(b)),
		version:       int16(binary.BigEndian.Uint16(b[2:])),
		correlationID: int32(binary.BigEndian.Uint32(b[4:])),
	}
	n := int(int16(binary.BigEndian.Uint16(b[8:])))
	rest := b[minRequestBytes:]
	switch {
	case n < -1:
		return h, nil, fmt.Errorf("%w: client id length %d", errMalformed, n)
	case n > len(rest):
		return h, nil, fmt.Errorf("%w: client id of %d bytes in %d", errMalformed, n, len(rest))
	case n > 0:
		h.clientID = string(rest[:n])
		rest = rest[n:]
	}
	return h, rest, nil
}

// skipHeaderTags skips the tagged fields of a flexible request header.
func skipHeaderTags(body []byte) ([]byte, error) {
	r := &tagReader{src: body, ok: true}
	kmsg.SkipTags(r)
	if !r.ok {
		return nil, fmt.Errorf("%w: header tags", errMalformed)
	}
	return r.src, nil
}

// tagReader is kmsg.TagReader over a byte slice; it stops at the first
// read past the end (kmsg checks Ok between tags).
type tagReader struct {
	src []byte
	ok  bool
}

func (r *tagReader) Uvarint() uint32 {
	v, n := binary.Uvarint(r.src)
	if n <= 0 || v > 1<<31 {
		r.ok, r.src = false, nil
		return 0
	}
	r.src = r.src[n:]
	return uint32(v)
}

func (r *tagReader) Span(n int) []byte {
	if n < 0 || n > len(r.src) {
		r.ok, r.src = false, nil
		return nil
	}
	s := r.src[:n]
	r.src = r.src[n:]
	return s
}

// Ok reports whether every read so far was within the input.
func (r *tagReader) Ok() bool { return r.ok }

// appendResponse frames resp as the answer to the request with header h:
// the size, the correlation id, the header's tags when flexible, the body.
func appendResponse(dst []byte, h requestHeader, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.correlationID))
	if resp.IsFlexible() && h.key != keyApiVersions {
		dst = append(dst, 0) // no tagged fields
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
