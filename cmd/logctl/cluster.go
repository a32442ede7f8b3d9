package main

import "github.com/spf13/cobra"

func newClusterCmd(opts *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Show the cluster's members, remove or drain a node, watch replica moves, move leadership, save a backup",
		Long: `Cluster membership. Nodes join with "logd --node-id ID --join ADDR" (the
address of any member's client API); they start as non-voters and are
promoted to voters once they have caught up.`,
	}
	cmd.AddCommand(
		newClusterStatusCmd(opts),
		newClusterRemoveCmd(opts),
		newClusterDrainCmd(opts),
		newClusterMovesCmd(opts),
		newClusterBalanceCmd(opts),
		newClusterTransferCmd(opts),
		newClusterSnapshotCmd(opts),
	)
	return cmd
}
