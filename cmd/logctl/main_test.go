package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/logd-dev/logd/logdtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
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
