package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

// groupConsumeWait is each poll's long-poll wait with --group.
const groupConsumeWait = time.Second

// consumeGroup is `logctl consume TOPIC --group G`: it joins the group,
// prints the records of the partitions the server assigns, and commits
// after each printed batch. Without --follow it stops at the first poll
// that finds nothing new; it leaves the group when it stops.
func consumeGroup(cmd *cobra.Command, opts *globalOpts, c *client.Client, topic string, f *consumeFlags) error {
	if f.partition >= 0 {
		return errors.New("--partition and --group exclude each other: the group assigns partitions")
	}
	policy := "earliest"
	switch {
	case !cmd.Flags().Changed("from"), f.from == "earliest", f.from == "beginning":
	case f.from == "latest", f.from == "end":
		policy = "latest"
	default:
		return fmt.Errorf("--from %q with --group: want earliest or latest (where a group without committed offsets starts); use 'logctl group reset-offsets' to move a group", f.from)
	}
	ctx := cmd.Context()
	gc, err := c.NewGroupConsumer(client.GroupConsumerOptions{
		Group: f.group, Topics: []string{topic}, ResetPolicy: policy, ManualCommit: true, MaxWait: groupConsumeWait,
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
		if len(recs) == 0 {
			if !f.follow || (f.timeout > 0 && time.Since(lastData) >= f.timeout) {
				return pr.flush()
			}
			continue
		}
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
}
