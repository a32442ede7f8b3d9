package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newQueueDescribeCmd(opts *globalOpts) *cobra.Command {
	var (
		output   string
		inFlight bool
	)
	cmd := &cobra.Command{
		Use:     "describe TOPIC GROUP",
		Short:   "Show a queue group: settings and, per partition, ready, in flight, delayed, done and dead-lettered records",
		Example: "  logctl queue describe orders workers\n  logctl queue describe orders workers -o yaml",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.withClient(output, func(c *client.Client) error {
				describe := c.DescribeQueueGroup
				if inFlight {
					describe = c.DescribeQueueGroupInFlight
				}
				d, err := describe(cmd.Context(), args[0], args[1])
				if err != nil {
					return err
				}
				if output != outputText {
					return writeData(opts.stdout, output, d)
				}
				fmt.Fprintf(opts.stdout, "Queue group %s on %s (created %s)\n", d.Group, d.Topic, d.Created.UTC().Format(time.RFC3339))
				if err := printQueueConfig(opts.stdout, d.Config); err != nil {
					return err
				}
				state := "running"
				if d.Paused {
					state = "PAUSED (no deliveries)"
				}
				fmt.Fprintf(opts.stdout, "State: %s; admission refusals: %d; dead-letter topic holds %s\n", state, d.AdmissionRefusals, count(d.DeadLetterRecords, "record"))
				fmt.Fprintln(opts.stdout, backlogLine(d))
				fmt.Fprintln(opts.stdout)
				tw := newTable(opts.stdout)
				fmt.Fprintln(tw, "PARTITION\tREADY\tIN FLIGHT\tDELAYED\tACKED\tDEAD-LETTERED\tDONE BELOW\tEND\tOLDEST READY\tOLDEST LEASE\tACK/S\tNACKED\tEXPIRED\tSTATE")
				for _, p := range d.Partitions {
					state = "ok"
					if p.AtCap {
						state = "AT IN-FLIGHT CAP"
					}
					if p.DeadPending > 0 {
						state += fmt.Sprintf(" (%d to dead-letter)", p.DeadPending)
					}
					age := "-"
					if p.Ready > 0 {
						age = p.OldestReadyAge.Round(time.Millisecond).String()
					}
					fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%.1f\t%d\t%d\t%s\n", p.Partition, p.Ready, p.InFlight, p.Delayed, p.Acked, p.DeadLettered,
						p.DoneOffset, p.EndOffset, age, durationOrDash(p.OldestInFlightAge), p.AckedPerSec, p.Nacked, p.Expired, state)
				}
				if err := tw.Flush(); err != nil || !inFlight {
					return err
				}
				return printInFlight(opts, d.InFlight)
			})
		},
	}
	addOutputFlag(cmd, &output)
	cmd.Flags().BoolVar(&inFlight, "in-flight", false, fmt.Sprintf("also list the records in flight: worker, delivery, lease expiry (at most %d)", maxInFlightListed))
	return cmd
}

// maxInFlightListed is the server's bound on one describe's in-flight list.
const maxInFlightListed = 10_000

// printInFlight lists the records in flight under the partition table.
func printInFlight(opts *globalOpts, recs []client.InFlightRecord) error {
	fmt.Fprintf(opts.stdout, "\nIn flight: %s", count(len(recs), "record"))
	if len(recs) >= maxInFlightListed {
		fmt.Fprintf(opts.stdout, " (the first %d)", maxInFlightListed)
	}
	fmt.Fprintln(opts.stdout)
	if len(recs) == 0 {
		return nil
	}
	tw := newTable(opts.stdout)
	fmt.Fprintln(tw, "PARTITION\tOFFSET\tWORKER\tDELIVERY\tCLAIMED\tLEASE UNTIL\tEXTENDED")
	for _, r := range recs {
		worker := r.Worker
		if worker == "" {
			worker = "-"
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%s\t%s\t%d\n", r.Partition, r.Offset, worker, r.Delivery,
			r.Delivered.UTC().Format(time.RFC3339Nano), r.LeaseDeadline.UTC().Format(time.RFC3339Nano), r.Extensions)
	}
	return tw.Flush()
}

// durationOrDash prints a positive duration rounded to milliseconds, else "-".
func durationOrDash(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.Round(time.Millisecond).String()
}

// backlogLine describes what admission control bounds: the backlog's
// records and bytes, its oldest unfinished record's age against the
// topic's age bound, and the drain rate retry-after hints come from.
func backlogLine(d client.QueueGroupDescription) string {
	exact := "exact"
	if !d.BacklogBytesExact {
		exact = "estimated"
	}
	bound := "no age bound"
	if d.MaxBacklogAge >= 0 {
		bound = "bound " + humanDuration(d.MaxBacklogAge)
	}
	return fmt.Sprintf("Backlog: %s, %s (%s); oldest unfinished %s (%s); drain %.1f records/s",
		count(d.BacklogRecords, "record"), formatBytes(d.BacklogBytes), exact, durationOrDash(d.OldestUnfinishedAge), bound, d.DrainPerSec)
}
