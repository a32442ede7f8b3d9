package server

import (
	"context"
	"io"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/backend"
)

// snapshotChunkBytes is the data one SaveSnapshotResponse carries at most.
const snapshotChunkBytes = 256 << 10

// SaveSnapshot streams a backup (replication/catchup/backup.go) taken on this
// node, which must lead: a follower answers NOT_LEADER with the leader's
// address, and the client calls it there. The interceptors of unary calls
// do not run for a stream, so the permission table's row is applied, and
// the audit line written, here.
func (s *Server) SaveSnapshot(ctx context.Context, req *connect.Request[logdv1.SaveSnapshotRequest], stream *connect.ServerStream[logdv1.SaveSnapshotResponse]) error {
	const procedure = logdv1connect.LogServiceSaveSnapshotProcedure
	err := s.authorize(ctx, procedure, req.Msg)
	if err == nil {
		err = s.saveSnapshot(ctx, stream)
	}
	s.auditLine(ctx, authFrom(ctx), procedure, nil, err)
	return err
}

func (s *Server) saveSnapshot(ctx context.Context, stream *connect.ServerStream[logdv1.SaveSnapshotResponse]) error {
	// A backup holds a chunk and its encoded message at a time, for as
	// long as it streams (answer_budget.go).
	if _, err := s.chargeAnswer(ctx, answerCost(snapshotChunkBytes)); err != nil {
		return err
	}
	cw := &chunkWriter{stream: stream, buf: make([]byte, 0, snapshotChunkBytes)}
	_, err := s.b.Backup(ctx, func(info backend.BackupInfo) (io.Writer, error) {
		h := info.Header
		first := &logdv1.SaveSnapshotResponse{Info: &logdv1.SnapshotInfo{Index: h.Index, Term: h.Term, SizeBytes: info.Size,
			Segments: int32(h.Segments), SegmentBytes: h.SegmentBytes, NodeId: h.Node, DataGroups: int32(len(h.Groups))}}
		if err := stream.Send(first); err != nil {
			return nil, err
		}
		return cw, nil
	})
	if err == nil {
		err = cw.flush()
	}
	if err != nil {
		return s.leaderHint(toConnectError(err))
	}
	return nil
}

// chunkWriter sends what is written to it in messages of up to
// snapshotChunkBytes.
type chunkWriter struct {
	stream *connect.ServerStream[logdv1.SaveSnapshotResponse]
	buf    []byte
}

func (c *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), cap(c.buf)-len(c.buf))
		c.buf = append(c.buf, p[:k]...)
		p = p[k:]
		if len(c.buf) == cap(c.buf) {
			if err := c.flush(); err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

// flush sends what is buffered. Send marshals the message before it
// returns, so the buffer is reused.
func (c *chunkWriter) flush() error {
	if len(c.buf) == 0 {
		return nil
	}
	err := c.stream.Send(&logdv1.SaveSnapshotResponse{Data: c.buf})
	c.buf = c.buf[:0]
	return err
}
