package catchup

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/logd-dev/logd/backend"
)

// PeerTransport is how a SegmentClient calls peers over HTTP: the one
// place that chooses the scheme, the TLS and the routes of calls to peers
// (peer.HTTP).
type PeerTransport interface {
	// Scheme is the URL scheme of calls to peers: "https" or "http".
	Scheme() string
	// Transport returns a new HTTP transport that dials peers in at most
	// dialTimeout; h2c asks for cleartext HTTP/2 only. The caller may set
	// further fields before its first use.
	Transport(dialTimeout time.Duration, h2c bool) *http.Transport
}

// SegmentClient fetches segment files from peers over the endpoint in
// segment_serve.go; it implements SegmentSource.
type SegmentClient struct {
	hc     *http.Client
	scheme string
	// Sign, if set, adds this node's proof of the cluster secret to each
	// request (peer.SignRequest), which a peer without peer TLS
	// requires; set it before the first fetch.
	Sign func(*http.Request)
}

// NewSegmentClient returns a SegmentClient that calls peers as p says
// (routes, and https with this node's certificate under peer TLS). It
// starts nothing.
func NewSegmentClient(p PeerTransport) *SegmentClient {
	t := p.Transport(2*time.Second, false)
	t.ResponseHeaderTimeout = 10 * time.Second
	return &SegmentClient{hc: &http.Client{Transport: t}, scheme: p.Scheme()}
}

func segmentURL(scheme, addr, path string, ref SegmentRef) string {
	q := url.Values{}
	q.Set("topic", ref.Topic)
	q.Set("topic_index", strconv.FormatUint(ref.TopicIndex, 10))
	q.Set("partition", strconv.Itoa(int(ref.Partition)))
	q.Set("base", strconv.FormatInt(ref.Base, 10))
	if ref.End >= 0 {
		q.Set("end", strconv.FormatInt(ref.End, 10))
	}
	if path == segmentDataPath || ref.End >= 0 {
		q.Set("bytes", strconv.FormatInt(ref.Bytes, 10))
	}
	return scheme + "://" + addr + path + "?" + q.Encode()
}

func (c *SegmentClient) get(ctx context.Context, addr, path string, ref SegmentRef) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, segmentURL(c.scheme, addr, path, ref), nil)
	if err != nil {
		return nil, err
	}
	if c.Sign != nil {
		c.Sign(req)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		if resp.StatusCode == http.StatusGone {
			// The peer applied a compaction, trim or deletion after the
			// snapshot (segment_serve.go).
			return nil, fmt.Errorf("%w: %s from %s: %s", backend.ErrSegmentGone, resp.Status, addr, bytes.TrimSpace(b))
		}
		return nil, fmt.Errorf("%s from %s: %s", resp.Status, addr, bytes.TrimSpace(b))
	}
	return resp, nil
}

// SegmentMeta implements SegmentSource.
func (c *SegmentClient) SegmentMeta(ctx context.Context, addr string, ref SegmentRef) ([]byte, error) {
	resp, err := c.get(ctx, addr, segmentMetaPath, ref)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	// A .meta file is a few dozen bytes.
	return io.ReadAll(io.LimitReader(resp.Body, 4096))
}

// SegmentData implements SegmentSource.
func (c *SegmentClient) SegmentData(ctx context.Context, addr string, ref SegmentRef) (io.ReadCloser, error) {
	resp, err := c.get(ctx, addr, segmentDataPath, ref)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength >= 0 && resp.ContentLength != ref.Bytes {
		resp.Body.Close()
		return nil, fmt.Errorf("segment %d from %s: %d bytes, want %d", ref.Base, addr, resp.ContentLength, ref.Bytes)
	}
	return resp.Body, nil
}

var _ SegmentSource = (*SegmentClient)(nil)
