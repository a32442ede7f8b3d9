package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

// completionTimeout bounds everything one completion asks the server: the
// shell waits for it at every tab, so a server that is down or does not
// answer costs at most this long, and then nothing is offered.
const completionTimeout = time.Second

// nameLister lists the names an argument may take; args are the
// arguments before it (a queue group's topic).
type nameLister func(ctx context.Context, c *client.Client, args []string) ([]string, error)

func topicNames(ctx context.Context, c *client.Client, _ []string) ([]string, error) {
	ts, err := c.ListTopics(ctx)
	names := make([]string, 0, len(ts))
	for _, t := range ts {
		names = append(names, t.Name)
	}
	return names, err
}

func groupNames(ctx context.Context, c *client.Client, _ []string) ([]string, error) {
	gs, err := c.ListGroups(ctx)
	names := make([]string, 0, len(gs))
	for _, g := range gs {
		names = append(names, g.Group)
	}
	return names, err
}

// queueGroupNames lists the queue groups of the topic before it.
func queueGroupNames(ctx context.Context, c *client.Client, args []string) ([]string, error) {
	gs, err := c.ListQueueGroups(ctx, args[0])
	names := make([]string, 0, len(gs))
	for _, g := range gs {
		names = append(names, g.Group)
	}
	return names, err
}

func redriveJobIDs(ctx context.Context, c *client.Client, _ []string) ([]string, error) {
	js, err := c.ListRedrives(ctx, "")
	ids := make([]string, 0, len(js))
	for _, j := range js {
		ids = append(ids, j.ID)
	}
	return ids, err
}

// completedArgs says, per command (its path below logctl), what each of
// its leading arguments names; the arguments after them complete to
// nothing (no file names). Context names complete from the local file
// (completeContextNames, context_cmd.go).
func completedArgs() map[string][]nameLister {
	return map[string][]nameLister{
		"produce":             {topicNames},
		"consume":             {topicNames},
		"topic describe":      {topicNames},
		"topic alter":         {topicNames},
		"topic delete":        {topicNames},
		"group describe":      {groupNames},
		"group delete":        {groupNames},
		"group reset-offsets": {groupNames},
		"queue create":        {topicNames},
		"queue describe":      {topicNames, queueGroupNames},
		"queue alter":         {topicNames, queueGroupNames},
		"queue claim":         {topicNames, queueGroupNames},
		"queue ack":           {topicNames, queueGroupNames},
		"queue nack":          {topicNames, queueGroupNames},
		"queue extend":        {topicNames, queueGroupNames},
		"queue top":           {topicNames, queueGroupNames},
		"queue pause":         {topicNames, queueGroupNames},
		"queue resume":        {topicNames, queueGroupNames},
		"dlq list":            {topicNames, queueGroupNames},
		"dlq redrive":         {topicNames, queueGroupNames},
		"dlq redrive list":    {topicNames},
		"dlq redrive status":  {redriveJobIDs},
		"dlq redrive stop":    {redriveJobIDs},
	}
}

// addNameCompletion gives every command of completedArgs under root its
// ValidArgsFunction.
func addNameCompletion(root *cobra.Command, opts *globalOpts) {
	table := completedArgs()
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		path := strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), root.Name()), " ")
		if listers, ok := table[path]; ok {
			c.ValidArgsFunction = opts.completeNames(listers)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// completeNames completes the argument at len(args) with its lister's
// names that start with what was typed, asking the server once, without
// retries, within completionTimeout. A failure offers nothing (and no
// file names): a completion has nowhere to report it.
func (o *globalOpts) completeNames(listers []nameLister) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) >= len(listers) {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		co := *o
		co.maxRetryTime, co.requestTimeout = 0, completionTimeout
		c, err := co.newClient()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer c.Close()
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		ctx, cancel := context.WithTimeout(ctx, completionTimeout)
		defer cancel()
		names, err := listers[len(args)](ctx, c, args)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		names = slices.DeleteFunc(names, func(n string) bool { return !strings.HasPrefix(n, toComplete) })
		slices.Sort(names)
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
