package replication

// DiskUsage is the file system holding a node's data directory, in bytes.
type DiskUsage struct {
	// Total is the file system's size; Free what is free on it; Avail
	// what of that an unprivileged process may use (less the root
	// reserve), what logd can still write.
	Total, Free, Avail uint64
}

// DiskUsage reports the file system of the data directory. A platform
// without statfs answers errors.ErrUnsupported.
func (n *Node) DiskUsage() (DiskUsage, error) {
	return diskUsage(n.cfg.DataDir)
}
