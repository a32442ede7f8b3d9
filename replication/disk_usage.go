package replication

import "github.com/logd-dev/logd/backend"

// DiskUsage reports the file system of the data directory. A platform
// without statfs answers errors.ErrUnsupported.
func (n *Node) DiskUsage() (backend.DiskUsage, error) {
	return diskUsage(n.cfg.DataDir)
}
