package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/replication/catchup"
)

// newRestoreCmd builds logd restore: a new node's data dir from a backup
// (replication/catchup/restore.go, docs/operations.md "Backup and restore").
func newRestoreCmd(stdout, stderr io.Writer) *cobra.Command {
	var from, dataDir, nodeID, raftAddr, raftAdvertise string
	cmd := &cobra.Command{
		Use:   "restore --from FILE --data-dir DIR [--node-id ID] [--raft-addr ADDR]",
		Short: "Build a new node's data directory from a backup",
		Long: `Restores a backup saved by "logctl cluster snapshot save" into DIR, which must
not exist or be empty. Started with "logd run" and the same --data-dir,
--node-id and --raft-addr (or --raft-advertise), the node leads a new
cluster of one voter holding the backup's state: every record, group
offset, queue state, idempotency key, token and ACL as of the backup's
cut of each group. A backup of a cluster with data groups restores them
as groups, each with this node as its only replica; run the node with the
old cluster's --data-groups-per-node and --replication-factor. Other nodes
then join it with --join as they would any cluster, and take replicas of
the groups.

The whole file is checked (every frame's CRC, every batch's CRC, the
trailer's SHA-256) and written beside DIR first; a truncated or damaged
file is refused and DIR is left as it was.`,
		Example: `  logd restore --from backup.logd --data-dir /var/lib/logd --node-id n1 --raft-addr 10.0.0.1:7071
  logd run --data-dir /var/lib/logd --node-id n1 --raft-addr 10.0.0.1:7071 --listen 10.0.0.1:7070`,
		Args:          cobra.NoArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(*cobra.Command, []string) error {
			if from == "" || dataDir == "" {
				return errors.New("restore: --from and --data-dir are required")
			}
			f, err := os.Open(from)
			if err != nil {
				return fmt.Errorf("restore: %w", err)
			}
			defer f.Close()
			adv := raftAdvertise
			if adv == "" {
				adv = raftAddr
			}
			logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			h, err := catchup.RestoreBackup(f, catchup.RestoreConfig{DataDir: dataDir, NodeID: nodeID, RaftAddress: adv, Logger: logger})
			if err != nil {
				return err
			}
			raftFlags := "--raft-addr " + raftAddr
			if raftAdvertise != "" {
				raftFlags += " --raft-advertise " + raftAdvertise
			}
			groups := ""
			if len(h.Groups) > 0 {
				groups = fmt.Sprintf(", %d data groups", len(h.Groups))
			}
			fmt.Fprintf(stdout, "restored %s into %s as node %s (Raft index %d, term %d%s, %d segments); start it with logd run --data-dir %s --node-id %s %s\n",
				from, dataDir, nodeID, h.Index, h.Term, groups, h.Segments, dataDir, nodeID, raftFlags)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&from, "from", "", "backup file to restore (required)")
	fs.StringVar(&dataDir, "data-dir", "", "data directory of the new node; must not exist or be empty (required)")
	fs.StringVar(&nodeID, "node-id", "n1", "the new node's id, as logd run will be given it")
	fs.StringVar(&raftAddr, "raft-addr", "127.0.0.1:7071", "the Raft address logd run will listen on")
	fs.StringVar(&raftAdvertise, "raft-advertise", "", "the Raft address peers will use; default --raft-addr")
	return cmd
}
