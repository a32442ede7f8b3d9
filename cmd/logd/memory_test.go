package main

import (
	"bytes"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestMemoryLimitFlag: --memory-limit comes from the flag, its variable or
// the file; a negative one is refused; a positive one becomes the
// runtime's soft memory limit, and 0 leaves the runtime's (GOMEMLIMIT's)
// alone.
func TestMemoryLimitFlag(t *testing.T) {
	file := writeConfig(t, "memory-limit: 268435456\n")
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want int64
	}{
		{want: 0},
		{args: []string{"--memory-limit", "209715200"}, want: 200 << 20},
		{env: map[string]string{"LOGD_MEMORY_LIMIT": "104857600"}, want: 100 << 20},
		{args: []string{"--config", file}, want: 256 << 20},
	} {
		c, err := parseFlags(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
		if err != nil || c.memoryLimit != tc.want {
			t.Errorf("%v %v: %d, %v; want %d", tc.args, tc.env, c.memoryLimit, err, tc.want)
		}
	}
	if _, err := parseFlags([]string{"--memory-limit", "-1"}, noEnv, io.Discard); err == nil || !strings.Contains(err.Error(), "--memory-limit") {
		t.Errorf("--memory-limit -1: %v", err)
	}

	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	debug.SetMemoryLimit(math.MaxInt64)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	noCgroup := t.TempDir()
	applyMemoryLimit(0, noEnv, noCgroup, logger)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("--memory-limit 0 set the limit to %d", got)
	}
	if logs.Len() != 0 {
		t.Fatalf("no limit, yet logged %q", logs.String())
	}
	applyMemoryLimit(300<<20, noEnv, noCgroup, logger)
	if got := debug.SetMemoryLimit(-1); got != 300<<20 {
		t.Fatalf("--memory-limit 314572800: the runtime's limit is %d", got)
	}
	if !strings.Contains(logs.String(), "bytes=314572800") || !strings.Contains(logs.String(), "from=--memory-limit") {
		t.Fatalf("logged %q", logs.String())
	}
}

// fakeCgroup writes /proc/self/cgroup and the given files under a new
// root directory.
func fakeCgroup(t *testing.T, selfCgroup string, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	files["proc/self/cgroup"] = selfCgroup
	for name, body := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestCgroupMemoryLimit: the limit of logd's cgroup, v2 or v1, at its own
// path or at the mount's top (a container's view), "max" and v1's
// largest value mean none, and garbage is an error.
func TestCgroupMemoryLimit(t *testing.T) {
	const v1Self = "12:pids:/x\n4:memory:/kubepods/pod1/c1\n3:cpu,cpuacct:/kubepods\n0::/\n"
	for _, tc := range []struct {
		name    string
		self    string
		files   map[string]string
		want    int64
		wantErr bool
	}{
		{"v2 own path", "0::/system.slice/logd.service\n", map[string]string{"sys/fs/cgroup/system.slice/logd.service/memory.max": "536870912\n"}, 512 << 20, false},
		{"v2 container root", "0::/\n", map[string]string{"sys/fs/cgroup/memory.max": "1073741824\n"}, 1 << 30, false},
		{"v2 path not visible", "0::/kubepods/pod1\n", map[string]string{"sys/fs/cgroup/memory.max": "268435456\n"}, 256 << 20, false},
		{"v2 max", "0::/\n", map[string]string{"sys/fs/cgroup/memory.max": "max\n"}, 0, false},
		{"v1 own path", v1Self, map[string]string{"sys/fs/cgroup/memory/kubepods/pod1/c1/memory.limit_in_bytes": "2147483648\n"}, 2 << 30, false},
		{"v1 unlimited", v1Self, map[string]string{"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0, false},
		{"no controller files", "0::/\n", map[string]string{}, 0, false},
		{"garbage", "0::/\n", map[string]string{"sys/fs/cgroup/memory.max": "lots\n"}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := fakeCgroup(t, tc.self, tc.files)
			got, file, err := cgroupMemoryLimit(root)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("cgroupMemoryLimit = %d (%s), %v; want %d, error %v", got, file, err, tc.want, tc.wantErr)
			}
		})
	}

	// applyMemoryLimit takes 90% of it unless the flag or GOMEMLIMIT
	// speaks first.
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	root := fakeCgroup(t, "0::/\n", map[string]string{"sys/fs/cgroup/memory.max": "1000000000\n"})
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	debug.SetMemoryLimit(math.MaxInt64)
	applyMemoryLimit(0, noEnv, root, logger)
	if got := debug.SetMemoryLimit(-1); got != 900000000 {
		t.Fatalf("in a cgroup of 1e9 bytes the limit is %d, want 9e8", got)
	}
	if !strings.Contains(logs.String(), "/sys/fs/cgroup/memory.max") {
		t.Fatalf("logged %q", logs.String())
	}
	debug.SetMemoryLimit(math.MaxInt64)
	applyMemoryLimit(0, func(k string) string {
		if k == "GOMEMLIMIT" {
			return "off"
		}
		return ""
	}, root, logger)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("GOMEMLIMIT=off, yet the cgroup set the limit to %d", got)
	}
	applyMemoryLimit(400<<20, noEnv, root, logger)
	if got := debug.SetMemoryLimit(-1); got != 400<<20 {
		t.Fatalf("--memory-limit beside a cgroup: %d", got)
	}
}
