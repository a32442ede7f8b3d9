//go:build !linux && !darwin

package replication

import (
	"errors"

	"github.com/logd-dev/logd/backend"
)

func diskUsage(string) (backend.DiskUsage, error) { return backend.DiskUsage{}, errors.ErrUnsupported }
