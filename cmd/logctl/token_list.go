package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newTokenListCmd(opts *globalOpts) *cobra.Command {
	var principal string
	cmd := newListCmd(opts, "List bearer tokens (never their secrets)", "  logctl token list\n  logctl token list --principal alice -o json",
		"ID\tPRINCIPAL\tDESCRIPTION\tCREATED\tEXPIRES\tCREATED BY",
		func(c *client.Client, ctx context.Context) ([]client.TokenInfo, error) {
			return c.ListTokens(ctx, principal)
		},
		func(t client.TokenInfo) string {
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", t.ID, t.Principal, orDash(t.Description), formatTime(t.Created), formatExpiry(t.Expires), orDash(t.CreatedBy))
		})
	cmd.Flags().StringVar(&principal, "principal", "", "list only this principal's tokens (User:NAME or NAME)")
	return cmd
}
