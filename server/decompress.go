package server

import (
	"compress/gzip"
	"io"

	"connectrpc.com/connect"
)

// boundedGzip is the gzip decompressor the Connect handlers use for
// compressed messages (gRPC, gRPC-Web, Connect streaming; a Connect unary
// gzip body is inflated by the request limits before Connect sees it). It
// fails as soon as a message inflates past limit. Connect's own gzip
// decompressor stops buffering at the handler's read bound too, but then
// inflates the rest of the message to report its size, so a few megabytes
// of gzip cost the CPU of inflating gigabytes.
type boundedGzip struct {
	zr    gzip.Reader
	limit int64
	n     int64
	// tooLarge builds the error of a message past limit.
	tooLarge func() error
}

func newBoundedGzip(limit int64, tooLarge func() error) func() connect.Decompressor {
	return func() connect.Decompressor { return &boundedGzip{limit: limit, tooLarge: tooLarge} }
}

// Read inflates up to limit bytes, then fails if the message holds more.
func (d *boundedGzip) Read(p []byte) (int, error) {
	if d.n >= d.limit {
		var one [1]byte
		n, err := d.zr.Read(one[:])
		if n > 0 {
			return 0, d.tooLarge()
		}
		return 0, err
	}
	if room := d.limit - d.n; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := d.zr.Read(p)
	d.n += int64(n)
	return n, err
}

// Reset starts on the next message.
func (d *boundedGzip) Reset(r io.Reader) error {
	d.n = 0
	return d.zr.Reset(r)
}

// Close releases the message.
func (d *boundedGzip) Close() error { return d.zr.Close() }

// gzipCompressor is Connect's gzip compressor; responses are never
// compressed (Handler), but a compression is registered with both halves.
func gzipCompressor() connect.Compressor { return gzip.NewWriter(io.Discard) }
