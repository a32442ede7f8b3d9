//go:build faults

package failpoint

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	gofail "go.etcd.io/gofail/runtime"
)

func TestTerms(t *testing.T) {
	Inject("testOff") // registered, no terms: nothing happens
	if err := gofail.Enable("testOff", "1*panic"); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			r := recover()
			if r == nil || !strings.Contains(fmt.Sprint(r), "failpoint testOff") {
				t.Errorf("Inject with a panic term: recovered %v, want a failpoint panic", r)
			}
		}()
		Inject("testOff")
	}()
	Inject("testOff") // 1*panic is exhausted
}

// TestReturnExits runs the test binary again with a return term in
// GOFAIL_FAILPOINTS and requires it to exit with ExitStatus.
func TestReturnExits(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		Inject("testExit")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestReturnExits$")
	cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1", "GOFAIL_FAILPOINTS=testExit=return")
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != ExitStatus {
		t.Fatalf("child: %v, want exit status %d\n%s", err, ExitStatus, out)
	}
	if !strings.Contains(string(out), "failpoint testExit") {
		t.Errorf("child output does not name the failpoint:\n%s", out)
	}
}
