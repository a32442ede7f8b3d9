//go:build faults

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/internal/faults"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/replication"
)

// applyFaults wires the LOGD_FAULT_* environment of a fault build into the
// node's configuration (internal/faults); unset, nothing changes. It
// returns what to call once the node is closed.
func applyFaults(cfg *replication.Config, getenv func(string) string, logger *slog.Logger) (func() error, error) {
	fc, err := faults.FromEnv(getenv)
	if err != nil {
		return nil, err
	}
	done := func() error { return nil }
	if fp := getenv("GOFAIL_FAILPOINTS"); fp != "" {
		logger.Warn("fault build: failpoints armed", "GOFAIL_FAILPOINTS", fp)
	}
	fsys := cfg.Log.FS
	if fsys == nil {
		fsys = log.OSFS{}
	}
	// A journal left by a run with the power cut on describes a cut that
	// has happened: it applies even if this run models none.
	journal := filepath.Join(cfg.DataDir, "faults", "powercut.journal")
	_, statErr := os.Stat(journal)
	if fc.PowerCut != faults.PowerCutOff || statErr == nil {
		pc, rep, err := faults.OpenPowerCut(fsys, journal)
		if err != nil {
			return nil, err
		}
		logger.Warn("fault build: power cut of the partition logs", "mode", getenv(faults.EnvPowerCut),
			"files_removed", rep.Files, "files_cut", rep.Truncated, "bytes_cut", rep.Bytes)
		if fc.PowerCut == faults.PowerCutOff {
			if err := pc.Close(); err != nil {
				return nil, err
			}
			if err := os.Remove(journal); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("remove power-cut journal: %w", err)
			}
		} else {
			fsys, done = pc, pc.Close
		}
	}
	// The same for Raft's log when raft-wal keeps it, through its own
	// file system seam (replication.Config.WrapRaftWALFS).
	walJournal := filepath.Join(cfg.DataDir, "faults", "walcut.journal")
	_, statErr = os.Stat(walJournal)
	if fc.PowerCut != faults.PowerCutOff || statErr == nil {
		wpc, rep, err := faults.OpenWALPowerCut(walJournal)
		if err != nil {
			done()
			return nil, err
		}
		logger.Warn("fault build: power cut of the Raft WAL", "mode", getenv(faults.EnvPowerCut),
			"files_removed", rep.Files, "writes_cut", rep.Extents, "bytes_cut", rep.Bytes)
		if fc.PowerCut == faults.PowerCutOff {
			if err := wpc.Close(); err != nil {
				done()
				return nil, err
			}
			if err := os.Remove(walJournal); err != nil && !errors.Is(err, fs.ErrNotExist) {
				done()
				return nil, fmt.Errorf("remove wal power-cut journal: %w", err)
			}
		} else {
			cfg.WrapRaftWALFS = wpc.Wrap
			partDone := done
			done = func() error { return errors.Join(partDone(), wpc.Close()) }
		}
	}
	if !fc.SlowSync.Zero() {
		logger.Warn("fault build: slow fsync", "delay", fc.SlowSync.String())
		fsys = faults.SlowFS{FS: fsys, Delay: fc.SlowSync}
	}
	if _, isOS := fsys.(log.OSFS); !isOS {
		cfg.Log.FS = fsys
	}
	var writeBack time.Duration
	if fc.PowerCut == faults.PowerCutNoSync {
		logger.Warn("fault build: Raft log written back, not fsynced", "interval", faults.WriteBackInterval)
		writeBack = faults.WriteBackInterval
	}
	if !fc.SlowSync.Zero() || writeBack > 0 {
		cfg.WrapRaftStores = func(ls raft.LogStore, ss raft.StableStore) (raft.LogStore, raft.StableStore) {
			return faults.NewLogStore(ls, fc.SlowSync, writeBack, nil), faults.StableStore{StableStore: ss, Delay: fc.SlowSync}
		}
	}
	if fc.ClockOffset != 0 {
		logger.Warn("fault build: clock offset", "offset", fc.ClockOffset)
		cfg.Now = faults.OffsetClock(fc.ClockOffset)
		cfg.Log.Now = cfg.Now
	}
	return done, nil
}
