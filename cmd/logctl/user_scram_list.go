package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newUserSCRAMListCmd(opts *globalOpts) *cobra.Command {
	var user string
	cmd := newListCmd(opts, "List SCRAM credentials (never their keys)", "  logctl user scram list\n  logctl user scram list --user alice -o json",
		"USER\tMECHANISM\tITERATIONS\tSET\tSET BY",
		func(c *client.Client, ctx context.Context) ([]client.SCRAMCredential, error) {
			return c.ListSCRAMCredentials(ctx, user)
		},
		func(s client.SCRAMCredential) string {
			return fmt.Sprintf("%s\t%s\t%d\t%s\t%s", s.User, s.Mechanism, s.Iterations, formatTime(s.Set), orDash(s.SetBy))
		})
	cmd.Flags().StringVar(&user, "user", "", "list only this user's credentials")
	return cmd
}
