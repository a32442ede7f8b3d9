package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newTopicListCmd(opts *globalOpts) *cobra.Command {
	return newListCmd(opts, "List topics", "  logctl topic list\n  logctl topic list -o json | jq -r '.[].name'",
		"NAME\tPARTITIONS\tCREATED",
		(*client.Client).ListTopics,
		func(t client.Topic) string {
			return fmt.Sprintf("%s\t%d\t%s", t.Name, t.Partitions, formatTime(t.Created))
		})
}
