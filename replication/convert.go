package replication

import (
	"slices"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
)

// The backend's vocabulary (package backend) and the state machine's
// commands and state are separate types: a command's payload is a format
// replicas decode, versioned with the feature level, while the front ends'
// requests and answers may change with the API. These functions convert
// between the two at the facade, field by field.

// redriveSpecIn is a front end's redrive request as the state machine's
// job definition; Ends and Principal are set by StartRedrive.
func redriveSpecIn(s backend.RedriveSpec) fsm.RedriveSpec {
	out := fsm.RedriveSpec{DeadLetterTopic: s.DeadLetterTopic, Target: s.Target, Reasons: slices.Clone(s.Reasons), Key: s.Key, HasKey: s.HasKey,
		SinceMs: s.SinceMs, UntilMs: s.UntilMs, FromOffset: s.FromOffset, ToOffset: s.ToOffset, Rate: s.Rate, MaxRedrives: s.MaxRedrives,
		Ends: slices.Clone(s.Ends), Principal: s.Principal}
	if len(s.Records) > 0 {
		out.Records = make([]fsm.RedriveRecord, len(s.Records))
		for i, r := range s.Records {
			out.Records[i] = fsm.RedriveRecord(r)
		}
	}
	return out
}

// redriveSpecOut is a job definition as the front ends see it.
func redriveSpecOut(s fsm.RedriveSpec) backend.RedriveSpec {
	out := backend.RedriveSpec{DeadLetterTopic: s.DeadLetterTopic, Target: s.Target, Reasons: slices.Clone(s.Reasons), Key: s.Key, HasKey: s.HasKey,
		SinceMs: s.SinceMs, UntilMs: s.UntilMs, FromOffset: s.FromOffset, ToOffset: s.ToOffset, Rate: s.Rate, MaxRedrives: s.MaxRedrives,
		Ends: slices.Clone(s.Ends), Principal: s.Principal}
	if len(s.Records) > 0 {
		out.Records = make([]backend.RedriveRecord, len(s.Records))
		for i, r := range s.Records {
			out.Records[i] = backend.RedriveRecord(r)
		}
	}
	return out
}

// redriveJobOut is a replicated job as the front ends see it.
func redriveJobOut(j fsm.RedriveJob) backend.RedriveJob {
	return backend.RedriveJob{ID: j.ID, Spec: redriveSpecOut(j.Spec), State: j.State, Error: j.Error,
		Progress: backend.RedriveProgress(j.Progress), CreatedNanos: j.CreatedNanos, UpdatedNanos: j.UpdatedNanos}
}

// createTopicIn is a creation as the state machine's command; the quota
// and the principal are the proposer's to set (Node.CreateTopic).
func createTopicIn(c backend.CreateTopic) fsm.CreateTopic {
	return fsm.CreateTopic{Name: c.Name, Partitions: c.Partitions, Config: c.Config}
}

// appendIn is a Kafka produce as the state machine's command.
func appendIn(a backend.Append) fsm.Append {
	out := fsm.Append{Topic: a.Topic, Batches: make([]fsm.PartitionBatch, len(a.Batches))}
	for i, b := range a.Batches {
		out.Batches[i] = fsm.PartitionBatch{Partition: b.Partition, Batch: b.Batch}
	}
	return out
}
