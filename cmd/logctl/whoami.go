package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newWhoAmICmd(opts *globalOpts) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Show the principal the node sees for logctl's credentials",
		Long: `Show who the node takes logctl to be: the principal of its bearer token or
client certificate (User:ANONYMOUS without either), how it was
authenticated, whether ACLs apply to it, and whether the node requires
authentication.`,
		Example: `  logctl whoami --token-file ~/.logd-token
  logctl whoami -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return opts.withClient(output, func(c *client.Client) error {
				id, err := c.WhoAmI(cmd.Context())
				if err != nil {
					return err
				}
				if output != outputText {
					return writeData(opts.stdout, output, id)
				}
				tw := newTable(opts.stdout)
				fmt.Fprintf(tw, "Principal:\t%s\n", id.Principal)
				fmt.Fprintf(tw, "Authenticated by:\t%s\n", id.Method)
				fmt.Fprintf(tw, "Superuser:\t%s\n", yesNo(id.Superuser))
				fmt.Fprintf(tw, "Auth required:\t%s\n", yesNo(id.AuthRequired))
				return tw.Flush()
			})
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
