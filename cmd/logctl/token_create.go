package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newTokenCreateCmd(opts *globalOpts) *cobra.Command {
	var (
		req    client.CreateTokenRequest
		output string
	)
	cmd := &cobra.Command{
		Use:   "create --principal NAME",
		Short: "Create a bearer token for a principal and print it (once)",
		Long: `Create a bearer token for a principal (User:NAME, or a bare NAME) and print
it on stdout: the only time it is shown, since the cluster keeps only a
verifier. Store it where the client will read it (a file given to
--token-file). With --ttl the token expires that long after creation.`,
		Example: `  logctl token create --principal alice --description "billing service" --ttl 720h > alice.token
  logctl token create --principal User:ci -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if req.TTL < 0 {
				return usagef("--ttl %v is negative", req.TTL)
			}
			return opts.withClient(output, func(c *client.Client) error {
				tok, err := c.CreateToken(cmd.Context(), req)
				if err != nil {
					return err
				}
				if output != outputText {
					err = writeData(opts.stdout, output, tok)
				} else {
					_, err = fmt.Fprintln(opts.stdout, tok.Token)
				}
				if err != nil {
					return err
				}
				expires := "does not expire"
				if !tok.Info.Expires.IsZero() {
					expires = "expires " + formatTime(tok.Info.Expires)
				}
				opts.logf("created token %s for %s (%s); it will not be shown again: store it now", tok.Info.ID, tok.Info.Principal, expires)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Principal, "principal", "", "who the token authenticates: User:NAME or NAME (required)")
	f.StringVar(&req.Description, "description", "", "what the token is for, shown by token list")
	f.DurationVar(&req.TTL, "ttl", 0, "expire the token this long after creation, e.g. 720h (default: never)")
	_ = cmd.MarkFlagRequired("principal")
	addOutputFlag(cmd, &output)
	return cmd
}
