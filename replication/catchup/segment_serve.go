package catchup

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/peer"
	"github.com/logd-dev/logd/replication/fsm"
)

// Segment transfer for snapshot catch-up (install.go): an HTTP endpoint
// on the API port, or on the peer listener of a node that has one (the
// front end mounts the handler NewSegmentHandler returns at
// backend.SegmentPathPrefix), for nodes only under peer TLS, that serves a
// segment's .meta file, or the first N bytes of its data file, streamed
// from disk in small chunks (the serving node never holds a segment in
// memory).
//
//	GET /internal/v1/segment/meta?topic=T&topic_index=I&partition=P&base=B&end=E&bytes=N
//	GET /internal/v1/segment/data?topic=T&topic_index=I&partition=P&base=B&end=E&bytes=N
//
// E and N are the segment's end offset and size as the snapshot lists it
// (E is optional, for callers that do not send it; N is required for data).
// 404: no such topic incarnation, partition or segment (this node is
// behind, or never had it); 416: the segment holds fewer than N bytes (this
// node is behind, ask another); 410: this node applied a compaction, trim
// or topic deletion after the snapshot, and no longer holds the segment as
// it lists it. A segment only grows by appends until compaction rewrites
// it, so a segment not compacted serves any prefix; a compacted one serves
// only the very version listed (same end, same size). Compaction keeps a
// segment's base and end, so the size tells the versions apart.
const (
	segmentMetaPath = backend.SegmentPathPrefix + "meta"
	segmentDataPath = backend.SegmentPathPrefix + "data"
)

// Segments finds the segments this node holds by the names a snapshot
// lists them under; the node's state machine (*fsm.FSM) implements it. It
// is called from the goroutines of HTTP requests and of backups.
type Segments interface {
	// LookupSegment returns the paths and the current extent of a segment
	// of the named topic incarnation. A segment deleted or replaced since
	// a snapshot listed it is backend.ErrSegmentGone; one this node does not
	// hold (yet) is another error, backend.ErrUnknownTopic or
	// backend.ErrUnknownPartition among them.
	LookupSegment(topic string, topicIndex uint64, p int32, base int64) (fsm.ServedSegment, error)
}

// NodeVerifier tells the nodes of the cluster from other callers of the
// segment endpoint; peer.TLS implements it.
type NodeVerifier interface {
	// VerifiedNode returns the node id of the node certificate presented
	// on a connection whose state is cs (nil: plaintext), and whether
	// there is one, verified by the cluster CA.
	VerifiedNode(cs *tls.ConnectionState) (id string, ok bool)
}

// NewSegmentHandler returns the handler that serves the segment files segs
// finds to peers that catch up from a snapshot; mount it at
// backend.SegmentPathPrefix. With nodes (under peer TLS) it answers only callers
// whose connection presented a verified node certificate, and 403 to
// anyone else, so the listener it is mounted on must verify client
// certificates of the cluster CA. With a nil nodes (a plaintext loopback
// cluster) it answers callers that prove the cluster secret
// (peer.VerifyRequest) once secret returns one, and anyone while it
// returns nil (a cluster of an earlier build). Errors of a copy cut short
// go to logger (nil: slog.Default()) at debug level.
func NewSegmentHandler(segs Segments, nodes NodeVerifier, secret func() []byte, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.Default()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if nodes == nil && secret != nil {
			if s := secret(); s != nil {
				if _, err := peer.VerifyRequest(r, s, time.Now()); err != nil {
					http.Error(w, "segments are served to nodes of the cluster only: "+err.Error(), http.StatusForbidden)
					return
				}
			}
		}
		if nodes != nil {
			if _, ok := nodes.VerifiedNode(r.TLS); !ok {
				http.Error(w, "segments are served to nodes of the cluster only: present a node certificate of the cluster CA", http.StatusForbidden)
				return
			}
		}
		if r.URL.Path != segmentMetaPath && r.URL.Path != segmentDataPath {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		isData := r.URL.Path == segmentDataPath
		ref, err := parseSegmentRef(r, isData)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		seg, err := segs.LookupSegment(ref.Topic, ref.TopicIndex, ref.Partition, ref.Base)
		if err != nil {
			lookupError(w, err)
			return
		}
		path := seg.Meta
		if isData {
			path = seg.Data
		}
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			// Deleted by retention (or with its topic) since the lookup.
			http.Error(w, fmt.Sprintf("segment %d was deleted since: %v", ref.Base, err), http.StatusGone)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		// Look again now that the file is open: a compaction that swapped
		// it in before the open shows here, so the checks below never take
		// a compacted file for the version listed. One swapped in after the
		// open shows too, and refuses a file that was still right: the
		// caller asks again.
		if seg, err = segs.LookupSegment(ref.Topic, ref.TopicIndex, ref.Partition, ref.Base); err != nil {
			lookupError(w, err)
			return
		}
		fi, err := f.Stat()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		dataSize := seg.Info.Bytes
		if isData {
			dataSize = fi.Size()
		}
		if seg.Info.Compacted && ref.End >= 0 && (seg.Info.EndOffset != ref.End || dataSize != ref.Bytes || seg.Info.Bytes != ref.Bytes) {
			http.Error(w, fmt.Sprintf("segment %d was compacted since (now ends at %d with %d bytes, listed %d with %d)",
				ref.Base, seg.Info.EndOffset, dataSize, ref.End, ref.Bytes), http.StatusGone)
			return
		}
		n := fi.Size()
		if isData {
			if fi.Size() < ref.Bytes {
				http.Error(w, fmt.Sprintf("segment %d has %d bytes, not %d", ref.Base, fi.Size(), ref.Bytes), http.StatusRequestedRangeNotSatisfiable)
				return
			}
			n = ref.Bytes
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		if _, err := io.Copy(w, io.NewSectionReader(f, 0, n)); err != nil {
			logger.Debug("serving segment", "path", path, "err", err)
		}
	})
}

// lookupError answers a failed segment lookup: 410 for a segment deleted
// or replaced since, 404 for one this node does not know.
func lookupError(w http.ResponseWriter, err error) {
	if errors.Is(err, backend.ErrSegmentGone) {
		http.Error(w, err.Error(), http.StatusGone)
		return
	}
	http.Error(w, err.Error(), http.StatusNotFound)
}

func parseSegmentRef(r *http.Request, withBytes bool) (SegmentRef, error) {
	q := r.URL.Query()
	var ref SegmentRef
	var err error
	ref.Topic = q.Get("topic")
	if ref.Topic == "" {
		return ref, errors.New("topic is required")
	}
	if ref.TopicIndex, err = strconv.ParseUint(q.Get("topic_index"), 10, 64); err != nil {
		return ref, fmt.Errorf("topic_index: %w", err)
	}
	p, err := strconv.ParseInt(q.Get("partition"), 10, 32)
	if err != nil || p < 0 {
		return ref, fmt.Errorf("partition: want a non-negative integer")
	}
	ref.Partition = int32(p)
	if ref.Base, err = strconv.ParseInt(q.Get("base"), 10, 64); err != nil || ref.Base < 0 {
		return ref, fmt.Errorf("base: want a non-negative integer")
	}
	ref.End = -1 // not sent: checked as by a peer of an older build
	if e := q.Get("end"); e != "" {
		if ref.End, err = strconv.ParseInt(e, 10, 64); err != nil || ref.End < ref.Base {
			return ref, fmt.Errorf("end: want an integer not below base")
		}
	}
	if withBytes || q.Get("bytes") != "" {
		if ref.Bytes, err = strconv.ParseInt(q.Get("bytes"), 10, 64); err != nil || ref.Bytes < 0 {
			return ref, fmt.Errorf("bytes: want a non-negative integer")
		}
	}
	if ref.End >= 0 && q.Get("bytes") == "" {
		return ref, fmt.Errorf("end without bytes")
	}
	return ref, nil
}
