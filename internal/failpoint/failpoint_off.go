//go:build !faults

package failpoint

// Inject marks the failpoint name. In the default build it does nothing.
func Inject(name string) {}
