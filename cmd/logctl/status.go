package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newStatusCmd(opts *globalOpts) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show a node's Raft state and the cluster members it knows",
		Example: `  logctl status
  logctl status --server 10.0.0.2:7070 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return opts.withClient(output, func(c *client.Client) error {
				st, err := c.Status(cmd.Context())
				if err != nil {
					return err
				}
				if output != outputText {
					return writeData(opts.stdout, output, st)
				}
				leader := st.LeaderID
				if st.LeaderAddress != "" {
					leader += " (" + st.LeaderAddress + ")"
				}
				if leader == "" {
					leader = "-"
				}
				tw := newTable(opts.stdout)
				fmt.Fprintf(tw, "Node:\t%s\n", st.NodeID)
				fmt.Fprintf(tw, "State:\t%s\n", st.State)
				fmt.Fprintf(tw, "Leader:\t%s\n", leader)
				fmt.Fprintf(tw, "Term:\t%d\n", st.Term)
				fmt.Fprintf(tw, "Commit index:\t%d\n", st.CommitIndex)
				fmt.Fprintf(tw, "Applied index:\t%d\n", st.AppliedIndex)
				fmt.Fprintf(tw, "Last log index:\t%d\n", st.LastLogIndex)
				if err := tw.Flush(); err != nil {
					return err
				}
				fmt.Fprintln(opts.stdout)
				tw = newTable(opts.stdout)
				fmt.Fprintln(tw, "MEMBER\tRAFT ADDRESS\tSUFFRAGE\tLEADER")
				for _, m := range st.Members {
					mark := ""
					if m.ID == st.LeaderID {
						mark = "*"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.ID, m.RaftAddress, m.Suffrage, mark)
				}
				return tw.Flush()
			})
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
