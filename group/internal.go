package group

import "strings"

// RedrivePrefix starts the name of a redrive job's position group (its
// committed offsets on the dead-letter topic are the job's position;
// replication/fsm redrive_state.go).
const RedrivePrefix = "logd-redrive."

// internalPrefixes start the names of groups logd keeps for itself.
var internalPrefixes = [...]string{RedrivePrefix}

// Internal reports whether a group is one logd keeps for its own work (a
// redrive job's position): listings and per-group lag metrics leave such
// groups out unless asked for all groups, since no operator consumes
// with them and their lag says nothing about an application.
func Internal(name string) bool {
	for _, p := range internalPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
