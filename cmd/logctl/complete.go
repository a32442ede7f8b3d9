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

// completedFlags says, per command (its path below logctl), what the
// values of its flags that name a server's topics, groups or queue groups
// are; without it, the shell offers file names there. Flags that name
// something new (bench queue's fresh topic and group) are left out.
func completedFlags() map[string]map[string]nameLister {
	aclNames := map[string]nameLister{"topic": topicNames, "group": groupNames, "queue": allQueueGroupNames}
	return map[string]map[string]nameLister{
		"consume":             {"group": groupNames},
		"group reset-offsets": {"topic": topicNames},
		"queue create":        {"dead-letter-topic": topicNames},
		"queue alter":         {"dead-letter-topic": topicNames},
		"dlq list":            {"dead-letter-topic": topicNames},
		"dlq redrive":         {"dead-letter-topic": topicNames, "target": topicNames},
		"acl add":             aclNames,
		"acl list":            aclNames,
		"acl remove":          aclNames,
		"bench produce":       {"topic": topicNames},
		"bench consume":       {"topic": topicNames},
		"bench e2e":           {"topic": topicNames},
	}
}

// allQueueGroupNames lists the names of the queue groups of every topic,
// once each (a queue ACL names a group on any topic).
func allQueueGroupNames(ctx context.Context, c *client.Client, _ []string) ([]string, error) {
	gs, err := c.ListQueueGroups(ctx, "")
	names := make([]string, 0, len(gs))
	for _, g := range gs {
		if !slices.Contains(names, g.Group) {
			names = append(names, g.Group)
		}
	}
	return names, err
}

// addNameCompletion gives every command of completedArgs under root its
// ValidArgsFunction, and every flag of completedFlags its completion.
func addNameCompletion(root *cobra.Command, opts *globalOpts) {
	args, flags := completedArgs(), completedFlags()
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		path := strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), root.Name()), " ")
		if listers, ok := args[path]; ok {
			c.ValidArgsFunction = opts.completeNames(listers)
		}
		for flag, lister := range flags[path] {
			// Fails only for a flag the command lacks, which
			// TestCompletedFlagsNameFlags catches.
			_ = c.RegisterFlagCompletionFunc(flag, opts.completeFlag(lister))
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// completeNames completes the argument at len(args) with its lister's
// names (listNames).
func (o *globalOpts) completeNames(listers []nameLister) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) >= len(listers) {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return o.listNames(cmd, listers[len(args)], args, toComplete)
	}
}

// completeFlag completes a flag's value with lister's names (listNames).
func (o *globalOpts) completeFlag(lister nameLister) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return o.listNames(cmd, lister, args, toComplete)
	}
}

// listNames returns lister's names that start with what was typed, asking
// the server once, without retries, within completionTimeout. A failure
// offers nothing (and no file names): a completion has nowhere to report
// it.
func (o *globalOpts) listNames(cmd *cobra.Command, lister nameLister, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
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
	names, err := lister(ctx, c, args)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names = slices.DeleteFunc(names, func(n string) bool { return !strings.HasPrefix(n, toComplete) })
	slices.Sort(names)
	return names, cobra.ShellCompDirectiveNoFileComp
}
