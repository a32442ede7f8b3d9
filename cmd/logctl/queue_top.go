package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newQueueTopCmd(opts *globalOpts) *cobra.Command {
	var (
		interval time.Duration
		once     bool
	)
	cmd := &cobra.Command{
		Use:   "top TOPIC GROUP",
		Short: "Live view of a queue group's health, redrawn every second (--once for one frame)",
		Long: `Shows, per partition: ready, in flight, delayed and dead-lettered records, the
oldest ready and in-flight ages, and completion, nack, expiry and dead-letter
rates; for the group: paused, admission refusals and the dead-letter topic's
size. Rates are measured between frames from the group's counters.`,
		Example: "  logctl queue top orders workers\n  logctl queue top orders workers --once",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if interval <= 0 {
				return usagef("--interval %v: want a positive duration", interval)
			}
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx := cmd.Context()
			tty := isTerminal(opts.stdout)
			var prev *topSample
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				d, err := c.DescribeQueueGroup(ctx, args[0], args[1])
				if err != nil {
					return err
				}
				cur := &topSample{at: time.Now(), desc: d}
				if tty && !once {
					io.WriteString(opts.stdout, "\x1b[H\x1b[2J") // home, clear
				}
				if err := drawTop(opts.stdout, cur, prev); err != nil {
					return err
				}
				if once {
					return nil
				}
				prev = cur
				select {
				case <-ctx.Done():
					if ctx.Err() == context.Canceled {
						return nil // interrupted: a normal end of a live view
					}
					return ctx.Err()
				case <-t.C:
				}
				if !tty {
					fmt.Fprintln(opts.stdout)
				}
			}
		},
	}
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "time between frames")
	cmd.Flags().BoolVar(&once, "once", false, "draw one frame and exit")
	return cmd
}

// topSample is one frame's data.
type topSample struct {
	at   time.Time
	desc client.QueueGroupDescription
}

// drawTop writes one aligned frame. Rates come from the difference to the
// previous frame; in the first frame (or --once) they are the server's.
func drawTop(w io.Writer, cur, prev *topSample) error {
	d := cur.desc
	state := "running"
	if d.Paused {
		state = "PAUSED"
	}
	fmt.Fprintf(w, "queue %s on %s  %s  %s\n", d.Group, d.Topic, state, cur.at.UTC().Format(time.TimeOnly))
	fmt.Fprintf(w, "admission refusals %d   dead-letter topic %s: %s\n", d.AdmissionRefusals, d.Config.DeadLetterTopic, count(d.DeadLetterRecords, "record"))
	fmt.Fprintf(w, "%s\n\n", backlogLine(d))
	tw := newTable(w)
	fmt.Fprintln(tw, "PART\tREADY\tIN FLIGHT\tDELAYED\tDEAD\tOLDEST READY\tOLDEST LEASE\tACK/S\tNACK/S\tEXPIRE/S\tDLQ/S")
	var sum client.QueuePartitionState
	var rates [4]float64
	for i, p := range d.Partitions {
		r := [4]float64{p.AckedPerSec, p.NackedPerSec, p.ExpiredPerSec, p.DeadLetteredPerSec}
		if prev != nil && i < len(prev.desc.Partitions) {
			q := prev.desc.Partitions[i]
			secs := cur.at.Sub(prev.at).Seconds()
			if secs > 0 {
				r = [4]float64{float64(p.Acked-q.Acked) / secs, float64(p.Nacked-q.Nacked) / secs,
					float64(p.Expired-q.Expired) / secs, float64(p.DeadLettered-q.DeadLettered) / secs}
			}
		}
		for j := range rates {
			rates[j] += r[j]
		}
		sum.Ready += p.Ready
		sum.InFlight += p.InFlight
		sum.Delayed += p.Delayed
		sum.DeadLettered += p.DeadLettered
		sum.OldestReadyAge = max(sum.OldestReadyAge, p.OldestReadyAge)
		sum.OldestInFlightAge = max(sum.OldestInFlightAge, p.OldestInFlightAge)
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%s\t%s\t%.1f\t%.1f\t%.1f\t%.1f\n", p.Partition, p.Ready, p.InFlight, p.Delayed, p.DeadLettered,
			age(p.OldestReadyAge), age(p.OldestInFlightAge), r[0], r[1], r[2], r[3])
	}
	fmt.Fprintf(tw, "all\t%d\t%d\t%d\t%d\t%s\t%s\t%.1f\t%.1f\t%.1f\t%.1f\n", sum.Ready, sum.InFlight, sum.Delayed, sum.DeadLettered,
		age(sum.OldestReadyAge), age(sum.OldestInFlightAge), rates[0], rates[1], rates[2], rates[3])
	return tw.Flush()
}

// age prints a duration for a table: "-" for none, else rounded.
func age(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	}
	return strings.TrimSuffix(d.Round(100*time.Millisecond).String(), ".0s")
}
