package kafka

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/dedup"
	"github.com/logd-dev/logd/partition"
	"github.com/logd-dev/logd/queue"
	"github.com/twmb/franz-go/pkg/kerr"
)

// kafkaSentinels are the backend's error sentinels the Kafka front end can
// meet, with the code each must map to. TestErrorTableCoversSentinels
// reads package replication's sources, so a new sentinel fails it until it
// is listed here or in notMet.
var kafkaSentinels = map[string]struct {
	err  error
	code int16
}{
	"ErrNotLeader":            {backend.ErrNotLeader, errNotLeaderOrFollower},
	"ErrPartitionElsewhere":   {backend.ErrPartitionElsewhere, errNotLeaderOrFollower},
	"ErrGroupElsewhere":       {backend.ErrGroupElsewhere, errNotLeaderOrFollower},
	"ErrBehind":               {backend.ErrBehind, errNotLeaderOrFollower},
	"ErrShutdown":             {backend.ErrShutdown, errNotLeaderOrFollower},
	"ErrUnknownTopic":         {backend.ErrUnknownTopic, errUnknownTopicOrPartition},
	"ErrUnknownPartition":     {backend.ErrUnknownPartition, errUnknownTopicOrPartition},
	"ErrLogClosed":            {backend.ErrLogClosed, errUnknownTopicOrPartition},
	"ErrTopicExists":          {backend.ErrTopicExists, errTopicAlreadyExists},
	"ErrInvalidConfig":        {backend.ErrInvalidConfig, errInvalidConfig},
	"ErrInvalidArgument":      {backend.ErrInvalidArgument, errInvalidRequest},
	"ErrInvalidTopicName":     {partition.ErrInvalidTopicName, errInvalidTopic},
	"ErrInvalidBatch":         {backend.ErrInvalidBatch, errCorruptMessage},
	"ErrRecordTooLarge":       {backend.ErrRecordTooLarge, errMessageTooLarge},
	"ErrBatchTooLarge":        {backend.ErrBatchTooLarge, errMessageTooLarge},
	"ErrOverloaded":           {backend.ErrOverloaded, errNotEnoughReplicas},
	"ErrOffsetOutOfRange":     {backend.ErrOffsetOutOfRange, errOffsetOutOfRange},
	"ErrTimeout":              {backend.ErrTimeout, errRequestTimedOut},
	"ErrStopped":              {backend.ErrStopped, errKafkaStorage},
	"ErrCorrupt":              {backend.ErrCorrupt, errKafkaStorage},
	"ErrQuotaExceeded":        {backend.ErrQuotaExceeded, errPolicyViolation},
	"ErrPartitionCount":       {backend.ErrPartitionCount, errInvalidPartitions},
	"ErrFeatureLevel":         {backend.ErrFeatureLevel, errPolicyViolation},
	"ErrIdempotencyConflict":  {dedup.ErrIdempotencyConflict, errInvalidRequest},
	"ErrDedupRace":            {backend.ErrDedupRace, errUnknownServer},
	"ErrKeyRequired":          {backend.ErrKeyRequired, errInvalidRecord},
	"ErrOutOfOrderSequence":   {backend.ErrOutOfOrderSequence, errOutOfOrderSequence},
	"ErrInvalidProducerEpoch": {backend.ErrInvalidProducerEpoch, errInvalidProducerEpoch},
	"ErrUnknownSCRAM":         {backend.ErrUnknownSCRAM, errResourceNotFound},
	"ErrTooManySCRAM":         {backend.ErrTooManySCRAM, errPolicyViolation},
}

// notMet are the sentinels of package backend that no call of this
// front end returns: membership, catch-up and the state machine's own
// stops (a stopped node answers ErrStopped), and tokens and ACLs, which
// the Kafka listener does not manage (it reads the ACLs, and asks nothing
// that could fail with these).
var notMet = []string{
	"ErrBadCommand", "ErrEntryDamaged", "ErrUnknownCommand", "ErrSnapshotAhead", "ErrDiverged",
	"ErrNoSegmentSource", "ErrSegmentGone", "ErrUnknownNode", "ErrMembershipChange", "ErrNodeHoldsReplicas",
	"ErrNodeUnreachable", "ErrNodeConflict", "ErrNoQuorum", "ErrBackupDataGroups",
	"ErrTokenExists", "ErrUnknownToken", "ErrTooManyTokens", "ErrTooManyACLs",
	// Redrive jobs, which only the Connect API drives.
	"ErrUnknownRedrive",
}

func TestErrorTableCoversSentinels(t *testing.T) {
	for name, s := range kafkaSentinels {
		wrapped := fmt.Errorf("context: %w", s.err)
		if got := codeFor(wrapped, opRecords); got != s.code {
			t.Errorf("%s: %s; want %s", name, errorName(got), errorName(s.code))
		}
	}
	if got := codeFor(backend.ErrNotLeader, opAdmin); got != errNotController {
		t.Errorf("ErrNotLeader in administration: %s; want NOT_CONTROLLER", errorName(got))
	}
	if got := codeFor(fmt.Errorf("what"), opRecords); got != errUnknownServer {
		t.Errorf("an unknown error: %s", errorName(got))
	}
	if ms := throttleFor(fmt.Errorf("x: %w", &backend.OverloadedError{RetryAfter: 2 * time.Second})); ms != 2000 {
		t.Errorf("throttle %d ms; want 2000", ms)
	}

	// Every sentinel declared in package backend is listed.
	listed := map[string]bool{}
	for _, n := range notMet {
		listed[n] = true
	}
	for _, d := range declaredSentinels(t, filepath.Join("..", "backend")) {
		if _, ok := kafkaSentinels[d.name]; !ok && !listed[d.name] {
			t.Errorf("backend.%s (%s) has no Kafka code: add it to kafkaSentinels (and errorTable) or notMet", d.name, d.file)
		}
	}
}

// queueSentinels are package queue's errors, which share-group requests
// meet (a share group is a queue group per topic), with the code each
// maps to. TestQueueErrorsHaveKafkaCodes reads package queue's sources,
// so a new sentinel fails it until it has a row here and in errorTable.
var queueSentinels = map[string]struct {
	err  error
	code int16
}{
	"ErrGroupNotFound":  {queue.ErrGroupNotFound, errGroupIDNotFound},
	"ErrGroupExists":    {queue.ErrGroupExists, errInvalidRequest},
	"ErrInvalidConfig":  {queue.ErrInvalidConfig, errInvalidConfig},
	"ErrInvalidRequest": {queue.ErrInvalidRequest, errInvalidRequest},
	"ErrBadToken":       {queue.ErrBadToken, errInvalidRecordState},
	"ErrStaleToken":     {queue.ErrStaleToken, errInvalidRecordState},
	"ErrGroupBusy":      {queue.ErrGroupBusy, errNonEmptyGroup},
}

// TestQueueErrorsHaveKafkaCodes: every sentinel of package queue maps to
// its own Kafka code, through errorTable (codeFor) and through the
// group requests' mapping (groupCode) that the share handlers use, never
// to UNKNOWN_SERVER_ERROR.
func TestQueueErrorsHaveKafkaCodes(t *testing.T) {
	for name, s := range queueSentinels {
		wrapped := fmt.Errorf("context: %w", s.err)
		if got := codeFor(wrapped, opAdmin); got != s.code {
			t.Errorf("queue.%s: codeFor %s; want %s", name, errorName(got), errorName(s.code))
		}
		if got := groupCode(wrapped); got != s.code {
			t.Errorf("queue.%s: groupCode %s; want %s", name, errorName(got), errorName(s.code))
		}
	}
	for _, d := range declaredSentinels(t, filepath.Join("..", "queue")) {
		if _, ok := queueSentinels[d.name]; !ok {
			t.Errorf("queue.%s (%s) has no Kafka code: add it to queueSentinels and errorTable", d.name, d.file)
		}
	}
}

// sentinel is an Err* variable declared in a package's sources.
type sentinel struct{ name, file string }

// declaredSentinels parses the non-test sources of the package in dir and
// returns its package-level Err* variables.
func declaredSentinels(t *testing.T, dir string) []sentinel {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no sources in %s: %v", dir, err)
	}
	var out []sentinel
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
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Err") {
						out = append(out, sentinel{name: n.Name, file: filepath.Base(path)})
					}
				}
			}
		}
	}
	return out
}

// TestErrorCodesAreKafkas checks the numbers and names of errors.go against
// franz-go's kerr.
func TestErrorCodesAreKafkas(t *testing.T) {
	for code, name := range errorNames {
		if code == errNone {
			continue
		}
		e := kerr.ErrorForCode(code)
		if e == nil {
			t.Errorf("%d (%s): not a Kafka error code", code, name)
			continue
		}
		// Kafka renamed NOT_LEADER_FOR_PARTITION (KIP-392); kerr keeps the old name.
		if ke, ok := e.(*kerr.Error); !ok || ke.Message != name && !(code == errNotLeaderOrFollower && ke.Message == "NOT_LEADER_FOR_PARTITION") {
			t.Errorf("code %d: kerr says %v, errors.go %s", code, e, name)
		}
	}
}
