package main

import (
	"time"

	"github.com/spf13/cobra"
)

func newTokenCmd(opts *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke bearer tokens",
		Long: `A bearer token (logd_<id>.<secret>) authenticates a principal; clients send
it with --token-file, --token or LOGCTL_TOKEN. The cluster keeps only a
verifier of the secret, so a token is shown once, when it is created.
Revoking a token refuses it from the next call on.`,
	}
	cmd.AddCommand(
		newTokenCreateCmd(opts),
		newTokenListCmd(opts),
		newTokenRevokeCmd(opts),
	)
	return cmd
}

// formatExpiry prints a token's expiry for tables: "never" for the zero
// time.
func formatExpiry(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return formatTime(t)
}

// orDash prints an empty string as "-" in tables.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
