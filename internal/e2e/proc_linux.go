package e2e

import "syscall"

// childAttrs makes the kernel kill a started logd when the test binary
// dies (a timeout's panic, a kill of go test), so no node outlives its test
// holding ports and data directories.
func childAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
