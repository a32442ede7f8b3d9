package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/logd-dev/logd/client"
)

// storyGroups: two consumer groups read the same topic, each at its own
// pace and with its own committed offsets; then billing's offsets are
// reset to the beginning and it replays, while analytics is untouched.
func storyGroups(ctx context.Context, d *demo) error {
	if _, err := d.c.CreateTopic(ctx, "orders", 1, nil); err != nil {
		return err
	}
	events := []string{"created", "paid", "shipped"}
	for _, e := range events {
		if _, err := d.c.Produce(ctx, "orders", []client.Record{{Key: []byte("order-1"), Value: []byte(e)}}); err != nil {
			return err
		}
	}
	d.say("produced order-1: %s", strings.Join(events, ", "))

	for _, g := range []string{"billing", "analytics"} {
		got, err := consumeGroup(ctx, d.c, g, len(events))
		if err != nil {
			return err
		}
		d.check(slices.Equal(got, events), "group %s read %v and committed", g, got)
	}

	plan, err := d.c.ResetGroupOffsets(ctx, client.ResetOffsetsRequest{Group: "billing", AllTopics: true, Strategy: client.ResetToEarliest, Execute: true})
	if err != nil {
		return err
	}
	d.check(plan.Executed && len(plan.Partitions) == 1 && plan.Partitions[0].Current == 3 && plan.Partitions[0].New == 0,
		"billing's offsets reset to the earliest: %s", describePlan(plan))
	got, err := consumeGroup(ctx, d.c, "billing", len(events))
	if err != nil {
		return err
	}
	d.check(slices.Equal(got, events), "billing replayed %v", got)

	if _, err := d.c.Produce(ctx, "orders", []client.Record{{Key: []byte("order-1"), Value: []byte("delivered")}}); err != nil {
		return err
	}
	got, err = consumeGroup(ctx, d.c, "analytics", 1)
	if err != nil {
		return err
	}
	d.check(slices.Equal(got, []string{"delivered"}), "analytics, not reset, resumed at its own offset and read only %v", got)
	return nil
}

func describePlan(p client.ResetPlan) string {
	var parts []string
	for _, r := range p.Partitions {
		parts = append(parts, fmt.Sprintf("%s/%d %d -> %d", r.Topic, r.Partition, r.Current, r.New))
	}
	return strings.Join(parts, ", ")
}

// consumeGroup joins group, reads n records of "orders", commits them and
// leaves.
func consumeGroup(ctx context.Context, c *client.Client, group string, n int) ([]string, error) {
	gc, err := c.NewGroupConsumer(client.GroupConsumerOptions{
		Group: group, Topics: []string{"orders"}, ManualCommit: true, MaxWait: 200 * time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	var got []string
	for len(got) < n {
		rs, err := gc.Poll(ctx)
		if err != nil {
			gc.Close(context.WithoutCancel(ctx))
			return got, fmt.Errorf("group %s: %w", group, err)
		}
		got = append(got, values(rs)...)
	}
	if err := gc.Commit(ctx); err != nil {
		gc.Close(context.WithoutCancel(ctx))
		return got, err
	}
	return got, gc.Close(ctx)
}
