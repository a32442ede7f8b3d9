package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// SnapshotInfo describes a backup the leader streams (SaveSnapshot).
type SnapshotInfo struct {
	// Index and Term are the Raft position of the state it holds.
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// Bytes is the size of the backup file.
	Bytes int64 `json:"bytes"`
	// Segments and SegmentBytes count the segment data it holds.
	Segments     int   `json:"segments"`
	SegmentBytes int64 `json:"segment_bytes"`
	// NodeID is the node that wrote it (the leader).
	NodeID string `json:"node_id"`
	// DataGroups counts the data groups whose parts it holds, each cut
	// after the meta group's, whose Raft position Index and Term are.
	DataGroups int `json:"data_groups"`
}

// ErrBackupIncomplete is wrapped by the error of a SaveSnapshot whose
// stream ended before the backup did; what was written is not a backup
// (logd restore refuses it).
var ErrBackupIncomplete = errors.New("logd: backup incomplete")

// saveSnapshotAttempts bounds the calls SaveSnapshot makes before the
// first byte arrives (a NOT_LEADER moves the client to the leader).
const saveSnapshotAttempts = 4

// SaveSnapshot streams a backup of the cluster's state at one Raft index
// (docs/operations.md, "Backup and restore") into w, as the leader writes
// it. progress, if set, is called with the bytes written so far and the
// backup's size, first with 0 once the size is known. Before the first
// byte the call is retried where the cluster sends it (the leader); once
// bytes were written a failure ends it with ErrBackupIncomplete. The
// backup holds tokens' hashes and ACLs: keep it as a secret.
func (c *Client) SaveSnapshot(ctx context.Context, w io.Writer, progress func(done, total int64)) (SnapshotInfo, error) {
	var lastErr error
	for attempt := range saveSnapshotAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return SnapshotInfo{}, fmt.Errorf("save snapshot: %w", ctx.Err())
			case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
			}
		}
		host := c.router.target()
		info, written, err := c.saveSnapshot(ctx, w, progress)
		if err == nil {
			return info, nil
		}
		if written > 0 {
			return info, fmt.Errorf("save snapshot: %w after %d of %d bytes: %w", ErrBackupIncomplete, written, info.Bytes, err)
		}
		c.router.observe(host, err)
		lastErr = err
		if !IsRetryable(err) {
			break
		}
	}
	return SnapshotInfo{}, fmt.Errorf("save snapshot: %w", lastErr)
}

func (c *Client) saveSnapshot(ctx context.Context, w io.Writer, progress func(done, total int64)) (SnapshotInfo, int64, error) {
	stream, err := c.rpc.SaveSnapshot(ctx, connect.NewRequest(&logdv1.SaveSnapshotRequest{}))
	if err != nil {
		return SnapshotInfo{}, 0, fromRPC(err)
	}
	defer stream.Close()
	var (
		info    SnapshotInfo
		written int64
		started bool
	)
	for stream.Receive() {
		m := stream.Msg()
		if i := m.GetInfo(); i != nil && !started {
			started = true
			info = SnapshotInfo{Index: i.GetIndex(), Term: i.GetTerm(), Bytes: i.GetSizeBytes(), Segments: int(i.GetSegments()),
				SegmentBytes: i.GetSegmentBytes(), NodeID: i.GetNodeId(), DataGroups: int(i.GetDataGroups())}
			if progress != nil {
				progress(0, info.Bytes)
			}
			continue
		}
		if !started {
			return info, 0, errors.New("backup stream without its description")
		}
		n, err := w.Write(m.GetData())
		written += int64(n)
		if err != nil {
			return info, written, fmt.Errorf("write backup: %w", err)
		}
		if progress != nil {
			progress(written, info.Bytes)
		}
	}
	if err := stream.Err(); err != nil {
		return info, written, fromRPC(err)
	}
	if !started || written != info.Bytes {
		return info, written, fmt.Errorf("stream ended at %d of %d bytes", written, info.Bytes)
	}
	return info, written, nil
}
