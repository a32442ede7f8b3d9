package server

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/dedup"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/internal/doctext"
	"github.com/logd-dev/logd/partition"
	"github.com/logd-dev/logd/peer"
	"github.com/logd-dev/logd/queue"
)

// backendSentinels are the error sentinels of the packages the backend
// answers with, by name. TestErrorTableCoversSentinels reads those
// packages' sources, so a new sentinel fails it until it is listed here,
// and then until errorTable has a row for it (or it is in internalErrors).
var backendSentinels = map[string]error{
	"backend.ErrNotLeader":            backend.ErrNotLeader,
	"backend.ErrPartitionElsewhere":   backend.ErrPartitionElsewhere,
	"backend.ErrGroupElsewhere":       backend.ErrGroupElsewhere,
	"backend.ErrBehind":               backend.ErrBehind,
	"backend.ErrUnknownTopic":         backend.ErrUnknownTopic,
	"backend.ErrUnknownRedrive":       backend.ErrUnknownRedrive,
	"backend.ErrTopicExists":          backend.ErrTopicExists,
	"backend.ErrUnknownPartition":     backend.ErrUnknownPartition,
	"backend.ErrInvalidConfig":        backend.ErrInvalidConfig,
	"backend.ErrInvalidArgument":      backend.ErrInvalidArgument,
	"backend.ErrBadCommand":           backend.ErrBadCommand,
	"backend.ErrEntryDamaged":         backend.ErrEntryDamaged,
	"backend.ErrUnknownCommand":       backend.ErrUnknownCommand,
	"backend.ErrStopped":              backend.ErrStopped,
	"backend.ErrShutdown":             backend.ErrShutdown,
	"backend.ErrTimeout":              backend.ErrTimeout,
	"backend.ErrOverloaded":           backend.ErrOverloaded,
	"backend.ErrRecordTooLarge":       backend.ErrRecordTooLarge,
	"backend.ErrDedupRace":            backend.ErrDedupRace,
	"backend.ErrSnapshotAhead":        backend.ErrSnapshotAhead,
	"backend.ErrUnknownNode":          backend.ErrUnknownNode,
	"backend.ErrMembershipChange":     backend.ErrMembershipChange,
	"backend.ErrNodeHoldsReplicas":    backend.ErrNodeHoldsReplicas,
	"backend.ErrBackupDataGroups":     backend.ErrBackupDataGroups,
	"backend.ErrNodeUnreachable":      backend.ErrNodeUnreachable,
	"backend.ErrNodeConflict":         backend.ErrNodeConflict,
	"backend.ErrNoQuorum":             backend.ErrNoQuorum,
	"peer.ErrIdentity":                peer.ErrIdentity,
	"peer.ErrNotNode":                 peer.ErrNotNode,
	"peer.ErrProof":                   peer.ErrProof,
	"backend.ErrOutOfOrderSequence":   backend.ErrOutOfOrderSequence,
	"backend.ErrInvalidProducerEpoch": backend.ErrInvalidProducerEpoch,
	"backend.ErrDiverged":             backend.ErrDiverged,
	"backend.ErrNoSegmentSource":      backend.ErrNoSegmentSource,
	"backend.ErrSegmentGone":          backend.ErrSegmentGone,
	"backend.ErrFeatureLevel":         backend.ErrFeatureLevel,
	"backend.ErrKeyRequired":          backend.ErrKeyRequired,
	"backend.ErrOffsetOutOfRange":     backend.ErrOffsetOutOfRange,
	"backend.ErrCorrupt":              backend.ErrCorrupt,
	"backend.ErrLogClosed":            backend.ErrLogClosed,
	"backend.ErrBatchTooLarge":        backend.ErrBatchTooLarge,
	"backend.ErrInvalidBatch":         backend.ErrInvalidBatch,
	"partition.ErrInvalidPartition":   partition.ErrInvalidPartition,
	"partition.ErrInvalidTopicName":   partition.ErrInvalidTopicName,
	"dedup.ErrIdempotencyConflict":    dedup.ErrIdempotencyConflict,
	"backend.ErrQuotaExceeded":        backend.ErrQuotaExceeded,
	"backend.ErrPartitionCount":       backend.ErrPartitionCount,
	"backend.ErrTokenExists":          backend.ErrTokenExists,
	"backend.ErrUnknownToken":         backend.ErrUnknownToken,
	"backend.ErrTooManyTokens":        backend.ErrTooManyTokens,
	"backend.ErrTooManyACLs":          backend.ErrTooManyACLs,
	"backend.ErrUnknownSCRAM":         backend.ErrUnknownSCRAM,
	"backend.ErrTooManySCRAM":         backend.ErrTooManySCRAM,

	"group.ErrConsumerGroupNotFound": group.ErrConsumerGroupNotFound,
	"group.ErrConsumerGroupNotEmpty": group.ErrConsumerGroupNotEmpty,
	"group.ErrUnknownMember":         group.ErrUnknownMember,
	"group.ErrStaleGeneration":       group.ErrStaleGeneration,
	"group.ErrNotAssigned":           group.ErrNotAssigned,
	"group.ErrOffsetAboveEnd":        group.ErrOffsetAboveEnd,
	"group.ErrInvalidGroupRequest":   group.ErrInvalidGroupRequest,
	"group.ErrUnknownGroupTopic":     group.ErrUnknownGroupTopic,
	"group.ErrNoResetPolicy":         group.ErrNoResetPolicy,
	"queue.ErrGroupNotFound":         queue.ErrGroupNotFound,
	"queue.ErrGroupExists":           queue.ErrGroupExists,
	"queue.ErrInvalidConfig":         queue.ErrInvalidConfig,
	"queue.ErrInvalidRequest":        queue.ErrInvalidRequest,
	"queue.ErrBadToken":              queue.ErrBadToken,
	"queue.ErrStaleToken":            queue.ErrStaleToken,
	"queue.ErrGroupBusy":             queue.ErrGroupBusy,

	"dedup.ErrBadEncoding": dedup.ErrBadEncoding,
}

// internalErrors never reach a handler as such: they stop the node (which
// then answers ErrStopped) or stay inside replication's catch-up or a
// call to a peer (peer.ErrNotNode: a forward fails as a connection that
// could not be made, a join's probe as ErrNodeUnreachable; peer.ErrProof:
// the segment endpoint answers it as 403 to a caller without the cluster
// secret). A client that saw one would get INTERNAL, as for any unknown
// error.
var internalErrors = map[string]bool{
	"peer.ErrNotNode":            true,
	"peer.ErrProof":              true,
	"backend.ErrBadCommand":      true,
	"backend.ErrEntryDamaged":    true,
	"backend.ErrUnknownCommand":  true,
	"backend.ErrSnapshotAhead":   true,
	"backend.ErrDiverged":        true,
	"backend.ErrNoSegmentSource": true,
	"backend.ErrSegmentGone":     true,
	"dedup.ErrBadEncoding":       true,
	// Directory names of partitions (partition.Dir), which no call reads.
	"partition.ErrInvalidPartition": true,
}

// sentinelNames returns "pkg.ErrX" for every exported package-level
// variable named Err* in the non-test Go files of dir.
func sentinelNames(t *testing.T, dir, pkg string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Err") && n.IsExported() {
						names = append(names, pkg+"."+n.Name)
					}
				}
			}
		}
	}
	return names
}

// TestErrorTableCoversSentinels: every error sentinel the backend answers
// with has a row in errorTable, unless it is internal.
func TestErrorTableCoversSentinels(t *testing.T) {
	var names []string
	names = append(names, sentinelNames(t, "../backend", "backend")...)
	names = append(names, sentinelNames(t, "../partition", "partition")...)
	names = append(names, sentinelNames(t, "../peer", "peer")...)
	names = append(names, sentinelNames(t, "../group", "group")...)
	names = append(names, sentinelNames(t, "../queue", "queue")...)
	names = append(names, sentinelNames(t, "../dedup", "dedup")...)
	if len(names) < 20 {
		t.Fatalf("found only %d sentinels: %v", len(names), names)
	}
	for _, name := range names {
		err, ok := backendSentinels[name]
		if !ok {
			t.Errorf("%s is not in backendSentinels: add it, and a row to errorTable if a client can see it", name)
			continue
		}
		row := rowFor(fmt.Errorf("context: %w", err))
		switch {
		case internalErrors[name] && row != nil:
			t.Errorf("%s is internal but has a row", name)
		case !internalErrors[name] && row == nil:
			t.Errorf("%s has no row in errorTable", name)
		}
	}
}

// TestToConnectError: codes, reasons and the data of typed errors.
func TestToConnectError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		code   connect.Code
		reason logdv1.Reason
		check  func(*logdv1.ErrorInfo) bool
		// msg, if set, is a part of the message the client sees.
		msg string
	}{
		{name: "not leader", err: fmt.Errorf("propose: %w", backend.ErrNotLeader), code: connect.CodeUnavailable, reason: logdv1.Reason_REASON_NOT_LEADER},
		{name: "group elsewhere", err: fmt.Errorf("commit: %w", backend.ErrGroupElsewhere), code: connect.CodeUnavailable, reason: logdv1.Reason_REASON_NOT_LEADER},
		{name: "behind", err: fmt.Errorf("group fetch: %w", &backend.BehindError{What: "generation 4 of group \"g\"", LeaderAddress: "10.0.0.1:7070"}),
			code: connect.CodeUnavailable, reason: logdv1.Reason_REASON_NOT_LEADER, msg: "generation 4",
			check: func(i *logdv1.ErrorInfo) bool { return i.LeaderAddress == "10.0.0.1:7070" }},
		{name: "out of range", err: fmt.Errorf("read: %w", &backend.OutOfRangeError{Offset: 9, Start: 3, End: 7}),
			code: connect.CodeOutOfRange, reason: logdv1.Reason_REASON_OFFSET_OUT_OF_RANGE,
			check: func(i *logdv1.ErrorInfo) bool { return i.LogStartOffset == 3 && i.EndOffset == 7 }},
		{name: "overloaded", err: &backend.OverloadedError{Topic: "t", Group: "g", RetryAfter: 1500 * 1e6},
			code: connect.CodeResourceExhausted, reason: logdv1.Reason_REASON_OVERLOADED,
			check: func(i *logdv1.ErrorInfo) bool { return i.RetryAfterMs == 1500 }},
		{name: "overloaded without hint", err: &backend.OverloadedError{Topic: "t", Group: "g"},
			code: connect.CodeResourceExhausted, reason: logdv1.Reason_REASON_OVERLOADED,
			check: func(i *logdv1.ErrorInfo) bool {
				return i.RetryAfterMs == backend.DefaultOverloadRetryAfter.Milliseconds()
			}},
		{name: "stale token", err: fmt.Errorf("ack: %w", queue.ErrStaleToken), code: connect.CodeFailedPrecondition, reason: logdv1.Reason_REASON_STALE_TOKEN},
		{name: "log closed", err: backend.ErrLogClosed, code: connect.CodeNotFound, reason: logdv1.Reason_REASON_UNKNOWN_TOPIC},
		{name: "corrupt read", err: errors.Join(errCorruptRead, errors.New("x")), code: connect.CodeDataLoss, reason: logdv1.Reason_REASON_STORAGE},
		{name: "feature level", err: fmt.Errorf("propose: %w", &backend.FeatureLevelError{Command: "some-kind", Need: 2, Cluster: 1}),
			code: connect.CodeFailedPrecondition, msg: "upgrade every node"},
		{name: "membership change in progress", err: fmt.Errorf("join: %w", backend.ErrMembershipChange),
			code: connect.CodeAborted, reason: logdv1.Reason_REASON_UNAVAILABLE,
			check: func(i *logdv1.ErrorInfo) bool { return i.RetryAfterMs == membershipRetryAfter.Milliseconds() }},
		{name: "joining node unreachable", err: fmt.Errorf("join: %w", backend.ErrNodeUnreachable), code: connect.CodeFailedPrecondition},
		{name: "joining node conflicts", err: fmt.Errorf("join: %w", backend.ErrNodeConflict), code: connect.CodeFailedPrecondition},
		{name: "a data group not backed up", err: fmt.Errorf("backup: %w", backend.ErrBackupDataGroups), code: connect.CodeFailedPrecondition},
		{name: "no reachable quorum", err: fmt.Errorf("join: %w", backend.ErrNoQuorum), code: connect.CodeUnavailable, reason: logdv1.Reason_REASON_UNAVAILABLE},
		{name: "canceled", err: context.Canceled, code: connect.CodeCanceled},
		{name: "unknown", err: errors.New("disk on fire"), code: connect.CodeInternal, reason: logdv1.Reason_REASON_STORAGE},
		{name: "internal sentinel", err: backend.ErrDiverged, code: connect.CodeInternal, reason: logdv1.Reason_REASON_STORAGE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ce *connect.Error
			if !errors.As(toConnectError(tc.err), &ce) {
				t.Fatal("not a connect error")
			}
			if ce.Code() != tc.code {
				t.Errorf("code %v, want %v", ce.Code(), tc.code)
			}
			if !strings.Contains(ce.Message(), tc.msg) {
				t.Errorf("message %q, want it to contain %q", ce.Message(), tc.msg)
			}
			var info *logdv1.ErrorInfo
			for _, d := range ce.Details() {
				if v, err := d.Value(); err == nil {
					info, _ = v.(*logdv1.ErrorInfo)
				}
			}
			switch {
			case tc.reason == logdv1.Reason_REASON_UNSPECIFIED && info != nil:
				t.Errorf("info %v, want none", info)
			case tc.reason != logdv1.Reason_REASON_UNSPECIFIED && (info == nil || info.Reason != tc.reason):
				t.Errorf("info %v, want reason %v", info, tc.reason)
			case tc.check != nil && !tc.check(info):
				t.Errorf("info %v", info)
			}
		})
	}
}

// TestErrorMessagesWithoutPackagePrefixes: what the API sends for a
// backend error, wrapped as handlers wrap them and nested as the backend
// nests them, names no Go package of this module ("replication: ",
// "partition: "), while errors.Is still finds the sentinel and logText,
// for the node's log, keeps the wrapped text.
func TestErrorMessagesWithoutPackagePrefixes(t *testing.T) {
	var pkgs []string
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != ".." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			if name := filepath.Base(filepath.Dir(path)); !slices.Contains(pkgs, name) {
				pkgs = append(pkgs, name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	prefixed := regexp.MustCompile(`(^|: )(` + strings.Join(pkgs, "|") + `): `)
	nested := fmt.Errorf("replication: invalid argument: %w", errors.New("partition: invalid topic name \"a b\""))
	cases := map[string]error{"nested": nested}
	for name, sentinel := range backendSentinels {
		cases[name] = sentinel
	}
	for name, sentinel := range cases {
		wrapped := fmt.Errorf("create topic %q: %w", "t", fmt.Errorf("apply: %w", sentinel))
		err := toConnectError(wrapped)
		var ce *connect.Error
		if !errors.As(err, &ce) {
			t.Fatalf("%s: not a connect error: %v", name, err)
		}
		if m := prefixed.FindString(ce.Message()); m != "" {
			t.Errorf("%s: the API sends %q, with %q", name, ce.Message(), m)
		}
		if !errors.Is(err, sentinel) {
			t.Errorf("%s: errors.Is lost the sentinel", name)
		}
		if logText(err) != wrapped.Error() {
			t.Errorf("%s: logText %q, want %q", name, logText(err), wrapped.Error())
		}
	}
	if got, want := toConnectError(nested).(*connect.Error).Message(), `invalid argument: invalid topic name "a b"`; got != want {
		t.Errorf("nested: %q, want %q", got, want)
	}
}

// TestGuideListsEveryReason: the table of error reasons in the user
// guide's "Errors" section names each reason of the API once, as it is on
// the wire (REASON_...), and no other.
func TestGuideListsEveryReason(t *testing.T) {
	section := doctext.ReadSection(t, "docs/guide.md", "### Errors")
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(REASON_[A-Z_]+)` \\|").FindAllStringSubmatch(section, -1) {
		documented = append(documented, m[1])
	}
	var want []string
	for name, n := range logdv1.Reason_value {
		if n != int32(logdv1.Reason_REASON_UNSPECIFIED) {
			want = append(want, name)
		}
	}
	slices.Sort(documented)
	slices.Sort(want)
	if !slices.Equal(documented, want) {
		t.Fatalf("docs/guide.md, \"Errors\", documents reasons %v,\nthe API has %v", documented, want)
	}
}
