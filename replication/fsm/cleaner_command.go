package fsm

// AlterTopic sets topic settings; keys not named keep their value. Keys in
// Delete return to their default; a key may not be both set and deleted.
type AlterTopic struct {
	Name   string            `json:"name"`
	Config map[string]string `json:"config"`
	Delete []string          `json:"delete,omitempty"`
}

// Trim deletes the closed segments of one partition whose end offset is <=
// Below (see log.DeleteBefore). TopicIndex is the CreateIndex of the topic
// incarnation the leader planned for, so a trim never reaches a later topic
// of the same name.
type Trim struct {
	Topic      string `json:"topic"`
	TopicIndex uint64 `json:"topic_index"`
	Partition  int32  `json:"partition"`
	Below      int64  `json:"below"`
}

// Compact compacts the closed segments of one partition below Below (see
// log.PrepareCompaction) with the tombstone horizon Horizon (ms). Sources
// are the segments the leader compacted and Checksum its output's checksum:
// a replica whose segments differ skips the command (it was applied before
// a restart, or a segment was deleted since), and one whose output differs
// has diverged and stops.
type Compact struct {
	Topic      string          `json:"topic"`
	TopicIndex uint64          `json:"topic_index"`
	Partition  int32           `json:"partition"`
	Below      int64           `json:"below"`
	Horizon    int64           `json:"horizon"`
	Sources    []SourceSegment `json:"sources"`
	Checksum   uint32          `json:"checksum"`
}

// SourceSegment identifies a segment by its extent and state.
type SourceSegment struct {
	Base      int64 `json:"base"`
	End       int64 `json:"end"`
	Bytes     int64 `json:"bytes"`
	Compacted bool  `json:"compacted,omitempty"`
}
