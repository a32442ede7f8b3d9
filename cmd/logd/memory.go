package main

import (
	"log/slog"
	"math"
	"runtime/debug"
)

// memoryLimitHelp is --memory-limit's help text.
const memoryLimitHelp = "soft limit of the Go runtime's memory, in bytes: the garbage collector works harder as the process nears it, and nothing is refused; " +
	"set it below a container's memory limit, with room for the binary and the page cache; 0: none of logd's, GOMEMLIMIT's if set (docs/performance.md, Memory) (LOGD_MEMORY_LIMIT)"

// applyMemoryLimit sets the Go runtime's soft memory limit to limit bytes
// (runtime/debug.SetMemoryLimit) when it is positive, and logs the limit
// in force.
//
// logd sets none by default: at the loads of docs/performance.md the
// node stays under 300 MB of RSS without one, and a limit below what
// the node really holds (request bodies in flight, up to
// --max-inflight-request-bytes, with their decoded records) makes the
// collector run back to back, at up to half the CPU, instead of letting
// the heap grow. Only the operator knows the machine's or container's
// memory, so the limit is theirs to set; GOMEMLIMIT, which the runtime
// reads itself, is kept unless the flag is given.
func applyMemoryLimit(limit int64, logger *slog.Logger) {
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	// A negative value reads the limit without changing it.
	if cur := debug.SetMemoryLimit(-1); cur != math.MaxInt64 {
		logger.Info("memory limit", "bytes", cur, "from", memoryLimitSource(limit))
	}
}

func memoryLimitSource(limit int64) string {
	if limit > 0 {
		return "--memory-limit"
	}
	return "GOMEMLIMIT"
}
