// Package failpoint names the points inside logd's durability steps where a
// fault build can make the process crash, stall or exit, so a test can stop
// a real node in the middle of a step (T6 in docs/faults.md).
//
// A step calls Inject with the point's name, on a line of its own:
//
//	failpoint.Inject("logRoll")
//
// In the default build Inject is an empty function the compiler inlines
// away: the binary holds no failpoint, reads no environment and depends on
// nothing outside the standard library. Built with -tags faults, Inject
// evaluates the point's terms through go.etcd.io/gofail's runtime, set from
// the GOFAIL_FAILPOINTS environment variable at start:
//
//	GOFAIL_FAILPOINTS='logRoll=panic;fsmSnapshotPersist=2*off->panic'
//
// Terms are gofail's: panic (a crash that unwinds only the failing
// goroutine), sleep(100) or sleep("1s") (a stall), print, off, with counts
// and chains ("2*off->panic" fires on the third call). return, with or
// without a value, exits the process at once with status ExitStatus
// without running deferred functions: a crash at exactly that point.
//
// Caveat: in a fault build, every package that calls Inject (log and the
// state machine among them) depends on gofail's runtime, which imports
// net/http (its optional GOFAIL_HTTP endpoint) and math/rand (its
// probability terms). The architecture test checks the default build; a
// fault build is for tests only.
//
// The points, by step (each name is used at exactly one call site):
//
//	logSegmentWrite      log: between a batch's header and its body
//	logFsync             log: before the active segment's fdatasync
//	logRoll              log: the old segment sealed, the new one not created
//	logRetentionDelete   log: one segment's files removed, the directory not synced
//	logCompactionSwap    log: the swap marker durable, one segment renamed in
//	logInstall           log: a staged catch-up segment renamed in, the rest not
//	fsmSnapshotPersist   replication/fsm: partitions synced, manifest not written
package failpoint

// ExitStatus is the exit status of a process that a return term stopped.
const ExitStatus = 86
