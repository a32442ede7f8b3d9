package main

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/logd-dev/logd/internal/buildinfo"
	"github.com/spf13/cobra"
)

// runFunc runs a node with its configuration until ctx ends (run in
// main.go; tests give their own).
type runFunc func(ctx context.Context, c config, getenv func(string) string, stderr io.Writer) error

// newRootCmd builds logd's command tree: run (the default), cert,
// version, health and restore, and --version. runNode runs the node once its flags are resolved.
func newRootCmd(getenv func(string) string, stdout, stderr io.Writer, runNode runFunc) *cobra.Command {
	root := &cobra.Command{
		Use:   "logd",
		Short: "A replicated, partitioned, append-only log server",
		Long: `logd runs a node of a logd cluster. Without a command it runs one: "logd"
alone is "logd run", a single-node cluster on 127.0.0.1 with its data in
./data, and "logd -data-dir x" is "logd run --data-dir x".

Every flag of logd run is also read from its LOGD_* variable (--data-dir from
LOGD_DATA_DIR) and from a YAML file given with --config (LOGD_CONFIG): a flag
on the command line wins over its variable, which wins over the file, which
wins over the default. The node logs the effective configuration at start.`,
		Version:       buildinfo.Read().String(),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate("logd {{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newRunCmd(getenv, stderr, runNode), newCertCmd(stdout, stderr), newVersionCmd(stdout), newHealthCmd(getenv, stdout),
		newRestoreCmd(stdout, stderr))
	return root
}

// newRunCmd builds logd run.
func newRunCmd(getenv func(string) string, stderr io.Writer, runNode runFunc) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run [flags]",
		Short: "Run a node (the default command)",
		Example: `  logd                                   # a single-node cluster, data in ./data
  logd run --data-dir /var/lib/logd --listen 10.0.0.1:7070 --node-id n1
  logd run --config /etc/logd/logd.yaml  # flags from a file; LOGD_* and flags override it
  logd -data-dir ./data2 -listen 127.0.0.1:7080   # single-dash spellings still parse`,
		Args:          cobra.NoArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	resolve := defineFlags(cmd.Flags())
	cmd.Flags().SortFlags = false
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := resolve(getenv)
		if err != nil {
			return err
		}
		return runNode(cmd.Context(), c, getenv, stderr)
	}
	return cmd
}

// newCertCmd builds logd cert, which parses its own flags (cert.go).
func newCertCmd(stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "cert ca|node|client [flags]",
		Short: "Create a development CA and certificates of nodes and clients",
		Example: `  logd cert ca --dir ./certs
  logd cert node --dir ./certs --id n1 --hosts 127.0.0.1,localhost
  logd cert client --dir ./certs --name alice`,
		DisableFlagParsing: true,
		SilenceErrors:      true,
		SilenceUsage:       true,
		RunE: func(_ *cobra.Command, args []string) error {
			return runCert(args, stdout, stderr, time.Now())
		},
	}
}

// defaultToRun returns the command line for root: "run" is put first when
// args name no command (none at all, or flags of logd run), and
// single-dash long flags of logd run get their second dash.
func defaultToRun(root *cobra.Command, args []string) []string {
	switch {
	case len(args) == 0:
		return []string{"run"}
	case args[0] == "-help" || args[0] == "-version":
		return append([]string{"-" + args[0]}, args[1:]...)
	case args[0] == "-h" || args[0] == "--help" || args[0] == "--version":
		return args
	case strings.HasPrefix(args[0], "-"):
		args = append([]string{"run"}, args...)
	}
	if args[0] != "run" {
		return args
	}
	runCmd, _, err := root.Find([]string{"run"})
	if err != nil {
		return args
	}
	return append([]string{"run"}, longFlagArgs(runCmd.Flags(), args[1:])...)
}
