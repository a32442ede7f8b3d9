package main

import "github.com/spf13/cobra"

func newBenchCmd(opts *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure produce and consume throughput and latency",
	}
	cmd.AddCommand(newBenchProduceCmd(opts), newBenchConsumeCmd(opts), newBenchQueueCmd(opts))
	return cmd
}
