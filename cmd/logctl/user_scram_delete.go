package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newUserSCRAMDeleteCmd(opts *globalOpts) *cobra.Command {
	var mechanism, output string
	cmd := &cobra.Command{
		Use:   "delete USER --mechanism SCRAM-SHA-256|SCRAM-SHA-512",
		Short: "Delete a user's SCRAM credential",
		Long: `Delete USER's SCRAM credential for one mechanism: the next SASL
authentication with it is refused (connections it authenticated stay
open).`,
		Example: `  logctl user scram delete alice --mechanism SCRAM-SHA-256`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.withClient(output, func(c *client.Client) error {
				info, err := c.DeleteSCRAMCredential(cmd.Context(), args[0], strings.ToUpper(mechanism))
				if err != nil {
					return err
				}
				if output != outputText {
					return writeData(opts.stdout, output, info)
				}
				_, err = fmt.Fprintf(opts.stdout, "deleted %s credential of %s\n", info.Mechanism, info.User)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&mechanism, "mechanism", "", "SCRAM-SHA-256 or SCRAM-SHA-512 (required)")
	_ = cmd.MarkFlagRequired("mechanism")
	addOutputFlag(cmd, &output)
	return cmd
}
