//go:build !faults

package failpoint

import "testing"

// TestDefaultBuildIgnoresTerms: without the faults tag, terms in the
// environment change nothing.
func TestDefaultBuildIgnoresTerms(t *testing.T) {
	t.Setenv("GOFAIL_FAILPOINTS", "testPoint=panic")
	Inject("testPoint") // would panic in a fault build
}
