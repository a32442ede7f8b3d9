package replication

import (
	"log/slog"
	"time"
)

// groupHousekeepingTick is how often a data group replica's housekeeping
// looks at its Raft log.
const groupHousekeepingTick = 500 * time.Millisecond

// startHousekeeping starts dg's housekeeping loop, which does for the
// replica what the node's housekeeping does for the meta group: it
// bounds the entries Raft keeps after a snapshot in bytes
// (boundTrailingLogs) and takes the snapshots Raft's own trigger does not
// (snapshotHousekeeping: by size, and after a stale one). Each replica
// snapshots its own Raft log, as every Raft node does. stopHousekeeping
// ends it.
func (dg *dataGroup) startHousekeeping(n *Node, logger *slog.Logger) {
	dg.housekeepingStop, dg.housekeepingDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(dg.housekeepingDone)
		t := time.NewTicker(groupHousekeepingTick)
		defer t.Stop()
		var lastRenewal time.Time
		settings := n.cfg.snapshotSettings()
		for {
			select {
			case <-dg.housekeepingStop:
				return
			case <-t.C:
			}
			boundTrailingLogs(dg.raft, dg.fsm, settings, logger)
			snapshotHousekeeping(dg.raft, dg.fsm, settings, logger, &lastRenewal)
		}
	}()
}

// stopHousekeeping ends dg's housekeeping loop and waits for it to return
// (a snapshot in progress finishes first).
func (dg *dataGroup) stopHousekeeping() {
	if dg.housekeepingStop == nil {
		return
	}
	close(dg.housekeepingStop)
	<-dg.housekeepingDone
}
