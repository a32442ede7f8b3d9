//go:build linux

package log

import (
	"os"
	"syscall"
)

// datasync is fdatasync(2): it flushes the data and the metadata needed to
// read it back (the file size), not timestamps.
func datasync(f *os.File) error {
	conn, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := conn.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}
