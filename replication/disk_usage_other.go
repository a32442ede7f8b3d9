//go:build !linux && !darwin

package replication

import "errors"

func diskUsage(string) (DiskUsage, error) { return DiskUsage{}, errors.ErrUnsupported }
