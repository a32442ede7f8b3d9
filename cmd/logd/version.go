package main

import (
	"fmt"
	"io"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/internal/buildinfo"
)

// newVersionCmd builds logd version.
func newVersionCmd(stdout io.Writer) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, build date and Go version",
		Example: `  logd version
  logd version --output json
  logd --version`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			info := buildinfo.Read()
			switch output {
			case "text":
				_, err := io.WriteString(stdout, info.Text("logd"))
				return err
			case "json":
				_, err := stdout.Write(info.JSON())
				return err
			}
			return fmt.Errorf("--output: want text or json, got %q", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

// buildInfoGauge is logd_build_info: always 1, its labels say which build
// runs, so that a dashboard can show versions across the cluster.
func buildInfoGauge(info buildinfo.Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "logd_build_info",
		Help: "The build of this node, in its labels (logd version); always 1.",
		ConstLabels: prometheus.Labels{
			"version": info.Version, "commit": info.Commit, "go_version": info.GoVersion,
		},
	})
	g.Set(1)
	return g
}
