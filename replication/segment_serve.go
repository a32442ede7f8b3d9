package replication

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
)

// Segment transfer for snapshot catch-up (install.go): a plain HTTP
// endpoint on the API port (the front end mounts SegmentHandler at
// SegmentPathPrefix) that serves a segment's .meta file, or the
// first N bytes of its data file, streamed from disk in small chunks (the
// serving node never holds a segment in memory).
//
//	GET /internal/v1/segment/meta?topic=T&topic_index=I&partition=P&base=B
//	GET /internal/v1/segment/data?topic=T&topic_index=I&partition=P&base=B&bytes=N
//
// 404: no such topic incarnation, partition or segment; 416: the segment
// holds fewer than N bytes (this node is behind, ask another).
const (
	// SegmentPathPrefix is where SegmentHandler is mounted.
	SegmentPathPrefix = "/internal/v1/segment/"
	segmentMetaPath   = SegmentPathPrefix + "meta"
	segmentDataPath   = SegmentPathPrefix + "data"
)

// SegmentHandler serves the segment files of this node to peers that
// catch up from a snapshot; mount it at SegmentPathPrefix.
func (b *Backend) SegmentHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != segmentMetaPath && r.URL.Path != segmentDataPath {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		ref, err := parseSegmentRef(r, r.URL.Path == segmentDataPath)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		dataPath, metaPath, err := b.FSM().SegmentFiles(ref.Topic, ref.TopicIndex, ref.Partition, ref.Base)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		path := metaPath
		if r.URL.Path == segmentDataPath {
			path = dataPath
		}
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			// Deleted by retention since the lookup.
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		n := fi.Size()
		if r.URL.Path == segmentDataPath {
			if fi.Size() < ref.Bytes {
				http.Error(w, fmt.Sprintf("segment %d has %d bytes, not %d", ref.Base, fi.Size(), ref.Bytes), http.StatusRequestedRangeNotSatisfiable)
				return
			}
			n = ref.Bytes
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		if _, err := io.Copy(w, io.NewSectionReader(f, 0, n)); err != nil {
			b.cfg.Logger.Debug("serving segment", "path", path, "err", err)
		}
	})
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
	if withBytes {
		if ref.Bytes, err = strconv.ParseInt(q.Get("bytes"), 10, 64); err != nil || ref.Bytes < 0 {
			return ref, fmt.Errorf("bytes: want a non-negative integer")
		}
	}
	return ref, nil
}
