package main

import (
	"github.com/spf13/cobra"
)

func newUserCmd(opts *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Manage users' credentials for the Kafka listener (SCRAM)",
	}
	scram := &cobra.Command{
		Use:   "scram",
		Short: "Set, delete and list SCRAM credentials",
		Long: `A SCRAM credential lets a Kafka client authenticate as User:NAME with
SASL SCRAM-SHA-256 or SCRAM-SHA-512 (and with PLAIN, the same password),
on a node started with --kafka-sasl-mechanisms. The cluster keeps a salted
verifier, never the password. Changing credentials needs alter on the
cluster, listing them describe.`,
	}
	scram.AddCommand(
		newUserSCRAMSetCmd(opts),
		newUserSCRAMDeleteCmd(opts),
		newUserSCRAMListCmd(opts),
	)
	cmd.AddCommand(scram)
	return cmd
}
