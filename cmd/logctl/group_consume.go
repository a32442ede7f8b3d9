package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

// groupConsumeWait is each poll's long-poll wait with --group.
const groupConsumeWait = time.Second

// consumeGroup is `logctl consume TOPIC --group G`: it joins the group,
// prints the records of the partitions the server assigns, and commits
// after each printed batch; it leaves the group when it stops.
//
// Without --follow it stops once it has read every partition assigned to
// it up to the end offsets the node reported when consume started (a
// member assigned nothing stops after its first poll). An empty poll is
// not the end: right after a join, or through a node that trails the
// leader, a poll may bring nothing although the group has lag. --timeout
// stops it after that long without a record, with or without --follow.
func consumeGroup(cmd *cobra.Command, opts *globalOpts, c *client.Client, topic string, f *consumeFlags) error {
	if f.partition >= 0 {
		return usagef("--partition and --group exclude each other: the group assigns partitions")
	}
	policy, err := groupResetPolicy(cmd, f)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	var ends map[client.TopicPartition]int64 // where to stop without --follow
	if !f.follow {
		d, err := c.DescribeTopic(ctx, topic)
		if err != nil {
			return err
		}
		ends = make(map[client.TopicPartition]int64, len(d.Partitions))
		for _, p := range d.Partitions {
			ends[client.TopicPartition{Topic: topic, Partition: p.Partition}] = p.End
		}
	}
	gc, err := c.NewGroupConsumer(client.GroupConsumerOptions{
		Group: f.group, Topics: []string{topic}, ResetPolicy: policy, ManualCommit: true, MaxWait: groupConsumeWait,
		OnAutoReset: func(r client.AutoReset) {
			opts.logf("warning: partition %d: retention removed group %s's records from offset %d; skipped %s to offset %d (--reset-policy %s)",
				r.Partition.Partition, f.group, r.From, count(r.To-r.From, "record"), r.To, policy)
		},
		Logger: groupLogger(opts, f.follow),
	})
	if err != nil {
		return err
	}
	defer func() {
		// Leave even when interrupted, so partitions move at once.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := gc.Close(lctx); err != nil {
			opts.logf("leave group %s: %v", f.group, err)
		}
	}()
	pr := newRecordPrinter(opts.stdout, f.output, f.meta)
	var n int64
	lastData := time.Now()
	for {
		recs, err := gc.Poll(ctx)
		if ctx.Err() != nil {
			return pr.flush() // interrupted: what was printed stands
		}
		if err != nil {
			return err
		}
		if ends != nil {
			recs = slices.DeleteFunc(recs, func(r client.FetchedRecord) bool {
				end, ok := ends[client.TopicPartition{Topic: r.Topic, Partition: r.Partition}]
				return ok && r.Offset >= end
			})
		}
		if len(recs) > 0 {
			lastData = time.Now()
			offsets := map[client.TopicPartition]int64{}
			for _, r := range recs {
				if f.max > 0 && n >= f.max {
					break
				}
				if err := pr.print(r); err != nil {
					return err
				}
				n++
				offsets[client.TopicPartition{Topic: r.Topic, Partition: r.Partition}] = r.Offset + 1
			}
			if err := pr.flush(); err != nil {
				return err
			}
			// Printed means processed: commit exactly what was printed.
			if err := gc.CommitOffsets(ctx, offsets); err != nil {
				return err
			}
			if f.max > 0 && n >= f.max {
				return nil
			}
		}
		if ends != nil && readToEnds(gc, ends) {
			if n == 0 && len(gc.Assignment()) == 0 {
				noteUnassigned(ctx, opts, c, f.group, topic)
			}
			return nil
		}
		if f.timeout > 0 && time.Since(lastData) >= f.timeout {
			return nil
		}
	}
}

// groupResetPolicy is the reset policy of --reset-policy, or of --from
// (earliest or latest: where a group without committed offsets starts),
// default earliest; the two must agree when both are given.
func groupResetPolicy(cmd *cobra.Command, f *consumeFlags) (string, error) {
	var fromPolicy string
	if cmd.Flags().Changed("from") {
		switch f.from {
		case "earliest", "beginning":
			fromPolicy = "earliest"
		case "latest", "end":
			fromPolicy = "latest"
		default:
			return "", usagef("--from %q with --group: want earliest or latest (where a group without committed offsets starts); use 'logctl group reset-offsets' to move a group", f.from)
		}
	}
	switch f.reset {
	case "":
		if fromPolicy != "" {
			return fromPolicy, nil
		}
		return "earliest", nil
	case "earliest", "latest", "none":
		if fromPolicy != "" && fromPolicy != f.reset {
			return "", usagef("--from %s and --reset-policy %s disagree: give one", f.from, f.reset)
		}
		return f.reset, nil
	}
	return "", usagef("--reset-policy %q: want earliest, latest or none", f.reset)
}

// readToEnds reports whether the member's position in every partition
// assigned to it is at or past that partition's end in ends.
func readToEnds(gc *client.GroupConsumer, ends map[client.TopicPartition]int64) bool {
	for _, tp := range gc.Assignment() {
		pos, ok := gc.Position(tp)
		if end, known := ends[tp]; ok && known && pos < end {
			return false
		}
	}
	return true
}

// groupLogger is the logger of consume --group's group consumer. With
// --follow, its info lines (a member waiting for the partitions another
// holds: whom, until when) are logctl's diagnostics on stderr, -v adds
// its debug lines; without --follow, noteUnassigned says what matters
// once the run ends, so it logs nothing.
func groupLogger(opts *globalOpts, follow bool) *slog.Logger {
	if !follow {
		return slog.New(slog.DiscardHandler)
	}
	level := slog.LevelInfo
	if opts.verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(prefixWriter{opts.stderr}, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey) {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// prefixWriter writes "logctl: " before each write, which a slog handler
// makes one per line.
type prefixWriter struct{ w io.Writer }

func (p prefixWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, "logctl: "); err != nil {
		return 0, err
	}
	return p.w.Write(b)
}

// noteUnassigned says on stderr why a run without --follow that was
// assigned no partition of topic read nothing, when group has lag there:
// other members hold the partitions (a member of a killed earlier run
// until its session expires, or more members than partitions). A failure
// to describe the group only leaves the note out.
func noteUnassigned(ctx context.Context, opts *globalOpts, c *client.Client, group, topic string) {
	d, err := c.DescribeGroup(ctx, group)
	if err != nil {
		return
	}
	var lag int64
	for _, p := range d.Partitions {
		if p.Topic == topic {
			lag += p.LagRecords
		}
	}
	if lag == 0 {
		return
	}
	var holders []string
	for _, m := range d.Members {
		var held []string
		for _, tp := range m.Partitions {
			if tp.Topic == topic {
				held = append(held, fmt.Sprintf("%s/%d", tp.Topic, tp.Partition))
			}
		}
		if len(held) > 0 {
			holders = append(holders, fmt.Sprintf("member %s holds %s (its session lasts until %s unless it heartbeats)",
				m.ID, strings.Join(held, ", "), m.LastSeen.Add(m.SessionTimeout).UTC().Format(timeMillis)))
		}
	}
	if len(holders) == 0 {
		holders = []string{"no member holds one yet"}
	}
	opts.logf("assigned no partition of %s: %s; group %s's lag of %s is left for the next run (or use --follow)",
		topic, strings.Join(holders, "; "), group, count(lag, "record"))
}
