//go:build !faults

package main

import (
	"strings"
	"testing"

	"github.com/logd-dev/logd/replication"
)

// TestDefaultBuildRefusesFaultEnv: a fault variable given to a default
// build is an error, not silently ignored.
func TestDefaultBuildRefusesFaultEnv(t *testing.T) {
	for _, name := range []string{"LOGD_FAULT_POWERCUT", "LOGD_FAULT_SLOW_FSYNC", "LOGD_FAULT_CLOCK_OFFSET", "GOFAIL_FAILPOINTS"} {
		var cfg replication.Config
		_, err := applyFaults(&cfg, func(k string) string {
			if k == name {
				return "1"
			}
			return ""
		}, nil)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=1: err = %v, want one naming it", name, err)
		}
	}
	var cfg replication.Config
	if _, err := applyFaults(&cfg, func(string) string { return "" }, nil); err != nil {
		t.Errorf("no fault variable: %v", err)
	}
}
