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
	"ErrNoSegmentSource", "ErrSegmentGone", "ErrUnknownNode", "ErrMembershipChange",
	"ErrNodeUnreachable", "ErrNodeConflict", "ErrNoQuorum",
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
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join("..", "backend", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, n := range notMet {
		listed[n] = true
	}
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
					if !strings.HasPrefix(n.Name, "Err") {
						continue
					}
					if _, ok := kafkaSentinels[n.Name]; !ok && !listed[n.Name] {
						t.Errorf("backend.%s (%s) has no Kafka code: add it to kafkaSentinels (and errorTable) or notMet", n.Name, filepath.Base(path))
					}
				}
			}
		}
	}
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
