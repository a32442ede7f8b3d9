//go:build !faults

package main

import (
	"fmt"
	"log/slog"

	"github.com/logd-dev/logd/replication"
)

// applyFaults injects nothing in the default build. It refuses a fault
// variable: whoever set it expects faults this binary cannot inject.
func applyFaults(_ *replication.Config, getenv func(string) string, _ *slog.Logger) (func() error, error) {
	// The variables only a fault build reads (internal/faults,
	// internal/failpoint).
	for _, name := range []string{"LOGD_FAULT_POWERCUT", "LOGD_FAULT_SLOW_FSYNC", "LOGD_FAULT_CLOCK_OFFSET", "GOFAIL_FAILPOINTS"} {
		if getenv(name) != "" {
			return nil, fmt.Errorf("%s is set, but this logd was built without -tags faults", name)
		}
	}
	return func() error { return nil }, nil
}
