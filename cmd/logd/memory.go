package main

import (
	"bufio"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// memoryLimitHelp is --memory-limit's help text.
const memoryLimitHelp = "soft limit of the Go runtime's memory, in bytes: the garbage collector works harder as the process nears it, and nothing is refused; " +
	"set it below a container's memory limit, with room for the binary and the page cache; 0: GOMEMLIMIT's if set, else 90% of the memory limit of logd's cgroup if it has one, else none (docs/performance.md, Memory) (LOGD_MEMORY_LIMIT)"

// cgroupLimitShare is the part of a cgroup's memory limit that becomes the
// Go runtime's soft limit when the operator set none: the rest is room for
// what the runtime does not count (the binary, thread stacks, the page
// cache the cgroup charges) before the kernel's OOM killer.
const cgroupLimitShare = 0.9

// applyMemoryLimit sets the Go runtime's soft memory limit
// (runtime/debug.SetMemoryLimit) and logs the limit in force. A positive
// limit (--memory-limit) wins; else GOMEMLIMIT, which the runtime reads
// itself, is kept when set (GOMEMLIMIT=off: no limit); else, in a cgroup
// with a memory limit (a container, a systemd unit with MemoryMax), the
// soft limit is cgroupLimitShare of it, read under root ("/" but in
// tests).
//
// Without a cgroup limit logd sets none: at the loads of
// docs/performance.md the node stays under 300 MB of RSS without one, and
// a limit below what the node really holds (request bodies in flight, up
// to --max-inflight-request-bytes, with their decoded records) makes the
// collector run back to back, at up to half the CPU, instead of letting
// the heap grow. Under a cgroup limit that choice is gone: a heap that
// grows past it is killed, so collecting harder near it is the better
// trade.
func applyMemoryLimit(limit int64, getenv func(string) string, root string, logger *slog.Logger) {
	from := ""
	switch {
	case limit > 0:
		debug.SetMemoryLimit(limit)
		from = "--memory-limit"
	case getenv("GOMEMLIMIT") != "":
		from = "GOMEMLIMIT"
	default:
		cg, file, err := cgroupMemoryLimit(root)
		if err != nil {
			logger.Warn("memory limit: cannot read the cgroup's; none set", "err", err)
		}
		if cg > 0 {
			debug.SetMemoryLimit(int64(float64(cg) * cgroupLimitShare))
			from = fmt.Sprintf("%.0f%% of %s (%d bytes)", cgroupLimitShare*100, file, cg)
		}
	}
	// A negative value reads the limit without changing it.
	if cur := debug.SetMemoryLimit(-1); cur != math.MaxInt64 {
		logger.Info("memory limit", "bytes", cur, "from", from)
	}
}

// cgroupMemoryLimit returns the memory limit of this process's cgroup in
// bytes, and the file it read it from, or 0 when there is none (no cgroup
// memory controller, or "max"). It reads /proc/self/cgroup for the
// cgroup's path (v2: the "0::" line; v1: the memory controller's line),
// then memory.max (v2) or memory.limit_in_bytes (v1) in that path under
// the hierarchy's mount, or at the mount's top when the path is not
// visible there (a container sees its own cgroup as the root).
func cgroupMemoryLimit(root string) (int64, string, error) {
	f, err := os.Open(filepath.Join(root, "proc/self/cgroup"))
	if os.IsNotExist(err) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("read cgroup: %w", err)
	}
	defer f.Close()
	var candidates []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			candidates = append(candidates,
				filepath.Join(root, "sys/fs/cgroup", parts[2], "memory.max"),
				filepath.Join(root, "sys/fs/cgroup/memory.max"))
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			candidates = append(candidates,
				filepath.Join(root, "sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes"),
				filepath.Join(root, "sys/fs/cgroup/memory/memory.limit_in_bytes"))
		}
	}
	if err := sc.Err(); err != nil {
		return 0, "", fmt.Errorf("read cgroup: %w", err)
	}
	for _, file := range candidates {
		b, err := os.ReadFile(file)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return 0, "", fmt.Errorf("read cgroup memory limit: %w", err)
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, "", nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return 0, "", fmt.Errorf("read cgroup memory limit: %s: %q is not a number of bytes", file, s)
		}
		// cgroup v1 writes "no limit" as the largest page-aligned int64.
		if n >= math.MaxInt64/2 {
			return 0, "", nil
		}
		return n, strings.TrimPrefix(file, filepath.Clean(root)), nil
	}
	return 0, "", nil
}
