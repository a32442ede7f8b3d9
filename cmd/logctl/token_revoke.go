package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newTokenRevokeCmd(opts *globalOpts) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a bearer token: calls with it are refused from now on",
		Example: `  logctl token list --principal alice
  logctl token revoke 3f2a9c0d1e4b5a67`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.withClient(output, func(c *client.Client) error {
				info, err := c.RevokeToken(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if output != outputText {
					return writeData(opts.stdout, output, info)
				}
				_, err = fmt.Fprintf(opts.stdout, "revoked token %s of %s\n", info.ID, info.Principal)
				return err
			})
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
