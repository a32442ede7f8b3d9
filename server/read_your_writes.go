package server

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/backend"
)

// Read your writes through a follower (docs/architecture.md, "Read
// guarantees"). A write a follower forwards is answered by the leader
// once applied there; the leader's answer carries AppliedIndexHeader, the
// Raft index it had applied when it answered, so at least the write's.
// The follower keeps the highest such index (readFloor) and, before it
// serves a read, waits until it has applied it (at most readFloorWait,
// then BEHIND, which sends the client to the leader). Every read through
// the follower that starts after it passed a write's acknowledgement on
// then sees the write.
//
// The wait is before the next read, not before answering the write: a
// writer that never reads through this node pays nothing, and a read
// that cannot catch up in time fails with an error rather than answering
// without the write, which a write answered after a bounded wait could
// not promise.

// AppliedIndexHeader, on the leader's answer to a forwarded call, is the
// Raft index the leader had applied when it answered.
const AppliedIndexHeader = "Logd-Applied-Index"

// WrittenHeader, on the answer to a forwarded produce to a topic placed
// on data groups, says where the records went: the topic (query-escaped),
// its incarnation and each partition's end after them
// ("orders;42;0=17,3=9"). The meta group's index orders nothing in a data
// group, so the forwarding node raises its floors of those partitions
// (backend NoteWritten) for its reads to see the write.
const WrittenHeader = "Logd-Written"

// encodeWritten is WrittenHeader's value for res, a produce to topic.
func encodeWritten(topic string, res backend.ProduceResult) string {
	ends := map[int32]int64{}
	for _, r := range res.Results {
		ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
	}
	var b strings.Builder
	b.WriteString(url.QueryEscape(topic))
	b.WriteByte(';')
	b.WriteString(strconv.FormatUint(res.Incarnation, 10))
	b.WriteByte(';')
	first := true
	for p, end := range ends {
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(strconv.FormatInt(int64(p), 10))
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(end, 10))
	}
	return b.String()
}

// decodeWritten parses a WrittenHeader value; ok is false for one that
// does not parse (ignored: the floor is then the meta group's only).
func decodeWritten(v string) (topic string, incarnation uint64, ends map[int32]int64, ok bool) {
	parts := strings.Split(v, ";")
	if len(parts) != 3 {
		return "", 0, nil, false
	}
	topic, err := url.QueryUnescape(parts[0])
	if err != nil {
		return "", 0, nil, false
	}
	if incarnation, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return "", 0, nil, false
	}
	ends = map[int32]int64{}
	for _, pe := range strings.Split(parts[2], ",") {
		ps, es, found := strings.Cut(pe, "=")
		p, err1 := strconv.ParseInt(ps, 10, 32)
		end, err2 := strconv.ParseInt(es, 10, 64)
		if !found || err1 != nil || err2 != nil || p < 0 || end < 0 {
			return "", 0, nil, false
		}
		ends[int32(p)] = end
	}
	return topic, incarnation, ends, true
}

// readFloorWait bounds how long a read waits for this node to apply what
// writes it forwarded were acknowledged at. A healthy follower trails the
// leader by one commit round (Raft's CommitTimeout, 50 ms).
const readFloorWait = 2 * time.Second

// readFloor is the highest index a forwarded write was acknowledged at.
type readFloor struct{ v atomic.Uint64 }

// raise makes the floor at least i.
func (f *readFloor) raise(i uint64) {
	for {
		cur := f.v.Load()
		if i <= cur || f.v.CompareAndSwap(cur, i) {
			return
		}
	}
}

// noteWritten raises the backend's floors of the partitions a forwarded
// produce's answer says it wrote, and drops the header.
func noteWritten(b backend.API, h http.Header) {
	if v := h.Get(WrittenHeader); v != "" {
		if topic, inc, ends, ok := decodeWritten(v); ok {
			b.NoteWritten(topic, inc, ends)
		}
		h.Del(WrittenHeader)
	}
}

// noteAcked raises the floor to the index a forwarded call's answer
// carries, and drops the header: clients are not told it.
func (f *readFloor) noteAcked(h http.Header) {
	if v := h.Get(AppliedIndexHeader); v != "" {
		if i, err := strconv.ParseUint(v, 10, 64); err == nil {
			f.raise(i)
		}
		h.Del(AppliedIndexHeader)
	}
}

// appliedIndexInterceptor sets AppliedIndexHeader on the answer to a
// call another node forwarded, once the handler decided (a write it
// served is applied by then), and on its error's metadata. It is set on
// the answer, not when its bytes are written: an answer with no body (an
// empty message in the binary codec: a drain's undo, an ack) writes none.
// Only unary calls are forwarded (the one stream, SaveSnapshot, is
// served by the leader alone).
//
// It also sets GroupsAppliedHeader: the data groups the call wrote to,
// each with the index its leader had applied when it acknowledged the
// write (backend.GroupsWritten), for the forwarding node's reads of them.
func (s *Server) appliedIndexInterceptor() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if req.Header().Get(ForwardedHeader) == "" {
				return next(ctx, req)
			}
			ctx, written := backend.WithGroupsWritten(ctx)
			resp, err := next(ctx, req)
			var h http.Header
			var ce *connect.Error
			switch {
			case err == nil && resp != nil:
				h = resp.Header()
			case errors.As(err, &ce):
				h = ce.Meta()
			default:
				return resp, err
			}
			h.Set(AppliedIndexHeader, strconv.FormatUint(s.b.AppliedIndex(), 10))
			if v := encodeGroupsApplied(written.Groups()); v != "" {
				h.Set(GroupsAppliedHeader, v)
			}
			return resp, err
		}
	}
}

// GroupsAppliedHeader, on the answer to a forwarded call that wrote to
// data groups, lists each group with the index its leader had applied
// when it acknowledged the write ("3=120,5=77"). The meta group's index
// orders nothing in a data group; the forwarding node raises its floors
// of those groups (backend NoteGroupsApplied), so its reads of them (a
// queue group's state after an ack, say) see the write.
const GroupsAppliedHeader = "Logd-Groups-Applied"

// encodeGroupsApplied is GroupsAppliedHeader's value for groups ("" for
// none).
func encodeGroupsApplied(groups map[uint64]uint64) string {
	var b strings.Builder
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(g, 10))
		b.WriteByte('=')
		b.WriteString(strconv.FormatUint(groups[g], 10))
	}
	return b.String()
}

// decodeGroupsApplied parses a GroupsAppliedHeader value; ok is false for
// one that does not parse (ignored).
func decodeGroupsApplied(v string) (map[uint64]uint64, bool) {
	out := map[uint64]uint64{}
	for _, ga := range strings.Split(v, ",") {
		gs, as, found := strings.Cut(ga, "=")
		g, err1 := strconv.ParseUint(gs, 10, 64)
		a, err2 := strconv.ParseUint(as, 10, 64)
		if !found || err1 != nil || err2 != nil || g == 0 {
			return nil, false
		}
		out[g] = max(out[g], a)
	}
	return out, true
}

// noteGroupsApplied raises the backend's floors of the data groups a
// forwarded call's answer says it wrote to, and drops the header.
func noteGroupsApplied(b backend.API, h http.Header) {
	if v := h.Get(GroupsAppliedHeader); v != "" {
		if groups, ok := decodeGroupsApplied(v); ok {
			b.NoteGroupsApplied(groups)
		}
		h.Del(GroupsAppliedHeader)
	}
}

// readFloorInterceptor makes a read wait until this node applied the
// read floor, and for a consistent read (read_index.go) the leader's read
// index too. Status answers at once: it reports the node's state.
func (s *Server) readFloorInterceptor() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			p := req.Spec().Procedure
			if !localProcedures[p] || p == logdv1connect.LogServiceStatusProcedure {
				return next(ctx, req)
			}
			floor := s.fwd.floor.v.Load()
			if req.Header().Get(ConsistentReadHeader) == "true" {
				i, err := s.readIndex(ctx, req)
				if err != nil {
					return nil, err
				}
				floor = max(floor, i)
			}
			if floor > 0 && floor > s.b.AppliedIndex() {
				if err := s.b.AwaitApplied(ctx, floor, readFloorWait); err != nil {
					return nil, toConnectError(err)
				}
			}
			return next(ctx, req)
		}
	}
}
