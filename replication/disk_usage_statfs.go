//go:build linux || darwin

package replication

import (
	"fmt"
	"syscall"

	"github.com/logd-dev/logd/backend"
)

func diskUsage(dir string) (backend.DiskUsage, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return backend.DiskUsage{}, fmt.Errorf("statfs %s: %w", dir, err)
	}
	bs := uint64(st.Bsize)
	return backend.DiskUsage{Total: uint64(st.Blocks) * bs, Free: uint64(st.Bfree) * bs, Avail: uint64(st.Bavail) * bs}, nil
}
