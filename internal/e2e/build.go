package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Version is the version the harness stamps into its logd, as make build
// and make release stamp theirs, so a test can see it reach logd version
// and logd_build_info.
const Version = "v0.0.0-e2e"

// buildinfoVersionVar is the linker variable Version is stamped into.
const buildinfoVersionVar = "github.com/logd-dev/logd/internal/buildinfo.version"

// Import paths of the binaries the harness builds.
const (
	logdPackage   = "github.com/logd-dev/logd/cmd/logd"
	logctlPackage = "github.com/logd-dev/logd/cmd/logctl"
)

// binDir is where Main built logd, set once before the tests run.
var binDir string

// Main builds logd into a temporary directory, runs the tests and
// removes the directory; it exits the process with the tests' status. A
// package whose tests use the harness calls it from TestMain:
//
//	func TestMain(m *testing.M) { e2e.Main(m) }
func Main(m *testing.M) {
	if os.Getenv(envChild) != "" {
		// A helper process of a test (ChildCommand) runs a client, not
		// logd: it builds nothing.
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "logd-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// A binary built with -race sleeps a second as it exits (GORACE's
	// atexit_sleep_ms, 1000 by default), time for goroutines still running
	// to report a race. logd joins its goroutines before it exits, and the
	// tests stop nodes and run logd's commands (directly and through
	// scripts/) again and again: each clean exit would cost that second.
	// A race found before the exit still makes it exit 66, which Stop and
	// the commands' callers see. Set for the children unless GORACE
	// already chooses it.
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	// One fault build for every test: its faults are inert unless a test
	// sets their environment (internal/faults, internal/failpoint).
	out, err := exec.Command("go", "build", "-race", "-tags", "faults", "-ldflags", "-X "+buildinfoVersionVar+"="+Version,
		"-o", filepath.Join(dir, "logd"), logdPackage).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build logd: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	binDir = dir
	shortParallel()
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// envChild marks a test binary ChildCommand started.
const envChild = "LOGD_E2E_CHILD"

// ChildCommand returns the command that runs this test binary again as a
// helper process of the test: it runs only test (an exact name, with
// -test.v), with env (KEY=VALUE) added to the test's environment, and dies
// with the test process as a node does. Main builds nothing in it. For a
// client that a test must kill for real (SIGKILL, SIGSTOP), where a
// goroutine of the test process cannot be: the helper test reads its
// arguments from env and skips without them, so a run of the whole package
// passes over it.
func ChildCommand(test string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd.Env = slices.Concat(os.Environ(), []string{envChild + "=1"}, env)
	cmd.SysProcAttr = childAttrs()
	return cmd
}

// Logd returns the path of the logd Main built. It panics when the test
// binary's TestMain did not call Main.
func Logd() string {
	if binDir == "" {
		panic("e2e: no logd binary: call e2e.Main from TestMain")
	}
	return filepath.Join(binDir, "logd")
}

var (
	logctlOnce sync.Once
	logctlErr  error
)

// LogctlBinary builds cmd/logctl beside logd on its first call and
// returns its path; it fails the test if the build failed.
func LogctlBinary(t testing.TB) string {
	t.Helper()
	path := filepath.Join(filepath.Dir(Logd()), "logctl")
	logctlOnce.Do(func() {
		out, err := exec.Command("go", "build", "-o", path, logctlPackage).CombinedOutput()
		if err != nil {
			logctlErr = fmt.Errorf("build logctl: %v\n%s", err, out)
		}
	})
	if logctlErr != nil {
		t.Fatal(logctlErr)
	}
	return path
}

// FaultLong reports whether the long versions of the tests run
// (LOGD_FAULT_LONG=1, make fault).
func FaultLong() bool { return os.Getenv("LOGD_FAULT_LONG") == "1" }

// parallelShort is how many ParallelShort tests run at once in the
// default run, whatever the number of CPUs (go test's -parallel defaults
// to GOMAXPROCS, two here): they wait on processes, timers and
// schedules, so on two cores four at a time overlap their waits. An
// explicit -test.parallel wins.
const parallelShort = 4

// shortParallel sets -test.parallel to parallelShort for the default run
// when the command line does not set it.
func shortParallel() {
	if FaultLong() {
		return
	}
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if f := flag.Lookup("test.parallel"); f != nil && !set {
		if err := f.Value.Set(strconv.Itoa(parallelShort)); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: -test.parallel:", err)
		}
	}
}

// ParallelShort lets a test run beside others in the default run
// (parallelShort at a time, after the package's serial tests): for tests that
// spend their time waiting on real processes, timers or schedules rather
// than on the CPU, that assert no timing, and that share nothing but the
// built binaries and the harness's port bookkeeping (FreeAddr). make
// fault runs them one at a time, as their long versions load the machine.
func ParallelShort(t *testing.T) {
	if !FaultLong() {
		t.Parallel()
	}
}
