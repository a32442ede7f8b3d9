package faults

import (
	"io/fs"

	"github.com/logd-dev/logd/log"
)

// SlowFS is a log.FS whose file and directory syncs each take Delay
// longer: a slow or overloaded disk.
type SlowFS struct {
	log.FS
	Delay Delay
}

var _ log.FS = SlowFS{}

// OpenFile opens a file whose Sync is slowed.
func (s SlowFS) OpenFile(name string, flag int, perm fs.FileMode) (log.File, error) {
	f, err := s.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return slowFile{File: f, delay: s.Delay}, nil
}

// SyncDir syncs a directory after the delay.
func (s SlowFS) SyncDir(dir string) error {
	s.Delay.Sleep()
	return s.FS.SyncDir(dir)
}

type slowFile struct {
	log.File
	delay Delay
}

// Sync syncs the file after the delay.
func (f slowFile) Sync() error {
	f.delay.Sleep()
	return f.File.Sync()
}
