//go:build !linux

package log

import "os"

func datasync(f *os.File) error { return f.Sync() }
