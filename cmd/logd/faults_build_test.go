package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestFaultsOnlyInFaultBuilds: the default logd links neither gofail nor
// the fault wrappers; a build with -tags faults links both.
func TestFaultsOnlyInFaultBuilds(t *testing.T) {
	const (
		gofail = "go.etcd.io/gofail/runtime"
		faults = "github.com/logd-dev/logd/internal/faults"
	)
	deps := func(tags ...string) map[string]bool {
		args := append([]string{"list", "-deps"}, tags...)
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		m := map[string]bool{}
		for _, p := range strings.Fields(string(out)) {
			m[p] = true
		}
		return m
	}
	def := deps()
	for _, p := range []string{gofail, faults} {
		if def[p] {
			t.Errorf("the default build of logd depends on %s", p)
		}
	}
	tagged := deps("-tags", "faults")
	for _, p := range []string{gofail, faults} {
		if !tagged[p] {
			t.Errorf("logd built with -tags faults does not depend on %s", p)
		}
	}
}
