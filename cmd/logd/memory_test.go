package main

import (
	"bytes"
	"io"
	"log/slog"
	"math"
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
	applyMemoryLimit(0, logger)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("--memory-limit 0 set the limit to %d", got)
	}
	if logs.Len() != 0 {
		t.Fatalf("no limit, yet logged %q", logs.String())
	}
	applyMemoryLimit(300<<20, logger)
	if got := debug.SetMemoryLimit(-1); got != 300<<20 {
		t.Fatalf("--memory-limit 314572800: the runtime's limit is %d", got)
	}
	if !strings.Contains(logs.String(), "bytes=314572800") || !strings.Contains(logs.String(), "from=--memory-limit") {
		t.Fatalf("logged %q", logs.String())
	}
}
