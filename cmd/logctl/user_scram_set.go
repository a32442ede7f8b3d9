package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newUserSCRAMSetCmd(opts *globalOpts) *cobra.Command {
	var (
		mechanism, passwordFile, output string
		iterations                      int
	)
	cmd := &cobra.Command{
		Use:   "set USER --mechanism SCRAM-SHA-256|SCRAM-SHA-512 --password-file FILE",
		Short: "Set a user's SCRAM credential from a password",
		Long: `Set USER's SCRAM credential for one mechanism, replacing the one it held.
The password is read from the first line of --password-file ("-": stdin),
never from the command line.`,
		Example: `  logctl user scram set alice --mechanism SCRAM-SHA-512 --password-file alice.pw
  printf '%s\n' "$PW" | logctl user scram set alice --mechanism SCRAM-SHA-256 --password-file -`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if iterations != 0 && (iterations < 4096 || iterations > 16384) {
				return usagef("--iterations %d: want 4096 to 16384", iterations)
			}
			pw, err := readPassword(opts, passwordFile)
			if err != nil {
				return err
			}
			return opts.withClient(output, func(c *client.Client) error {
				info, err := c.SetSCRAMCredential(cmd.Context(), args[0], strings.ToUpper(mechanism), pw, iterations)
				if err != nil {
					return err
				}
				if output != outputText {
					return writeData(opts.stdout, output, info)
				}
				_, err = fmt.Fprintf(opts.stdout, "set %s credential of %s (%d iterations)\n", info.Mechanism, info.User, info.Iterations)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&mechanism, "mechanism", "", "SCRAM-SHA-256 or SCRAM-SHA-512 (required)")
	f.StringVar(&passwordFile, "password-file", "", `file whose first line is the password; "-" reads stdin (required)`)
	f.IntVar(&iterations, "iterations", 0, "PBKDF2 iterations, 4096 to 16384 (default 4096)")
	_ = cmd.MarkFlagRequired("mechanism")
	_ = cmd.MarkFlagRequired("password-file")
	addOutputFlag(cmd, &output)
	return cmd
}

// readPassword reads the first line of path ("-": stdin), without its
// line ending; an empty one is a usage error.
func readPassword(opts *globalOpts, path string) (string, error) {
	var r io.Reader = opts.stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return "", fmt.Errorf("read password: %w", err)
		}
		defer f.Close()
		r = f
	}
	line, err := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("read password: %w", err)
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", usagef("--password-file %s: empty password", path)
	}
	return line, nil
}
