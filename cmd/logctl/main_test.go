package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/logd-dev/logd/logdtest"
)

func TestMain(m *testing.M) {
	// logctl reads its contexts from the user's config dir: the tests get
	// an empty one of their own, so a developer's current context is not
	// used by them (tests of contexts set their own with t.Setenv).
	dir, err := os.MkdirTemp("", "logctl-test-config")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_CONFIG_HOME", dir)
	os.Setenv("HOME", dir) // where the config dir is not XDG's (macOS)
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// cliResult is the outcome of one logctl invocation.
type cliResult struct {
	code   int
	stdout string
	stderr string
}

// runCLI runs logctl in-process against srv with the given stdin.
func runCLI(t *testing.T, srv *logdtest.Server, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	env := func(k string) string {
		if k == "LOGD_SERVER" && srv != nil {
			return srv.Addr()
		}
		return ""
	}
	var in io.Reader = strings.NewReader(stdin)
	code := run(ctx, args, in, &stdout, &stderr, env)
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// mustRun runs logctl and fails the test unless it exits 0.
func mustRun(t *testing.T, srv *logdtest.Server, stdin string, args ...string) cliResult {
	t.Helper()
	r := runCLI(t, srv, stdin, args...)
	if r.code != 0 {
		t.Fatalf("logctl %s: exit %d, stderr:\n%s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r
}
