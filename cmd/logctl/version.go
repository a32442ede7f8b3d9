package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/internal/buildinfo"
)

func newVersionCmd(opts *globalOpts) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print logctl's version, commit, build date and Go version",
		Long: `Print which build of logctl this is: its module version, the commit and
date it was built from, and the Go version. logctl --version prints the
same on one line. It calls no server.`,
		Example: `  logctl version
  logctl version -o json
  logctl --version`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			info := buildinfo.Read()
			if output != outputText {
				return writeData(opts.stdout, output, info)
			}
			_, err := io.WriteString(opts.stdout, info.Text("logctl"))
			return err
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
