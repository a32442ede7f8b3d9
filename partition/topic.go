package partition

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// MaxTopicNameLength is Kafka's limit: 255 minus room for a partition suffix
// and the ".deleted" marker in a directory name.
const MaxTopicNameLength = 249

// ValidateTopicName reports whether name is a legal topic name: 1 to 249
// characters of [a-zA-Z0-9._-], and not "." or "..". The error is a
// [*TopicNameError] matching [ErrInvalidTopicName].
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return &TopicNameError{Name: name, Reason: "empty"}
	case name == "." || name == "..":
		return &TopicNameError{Name: name, Reason: `"." and ".." are reserved`}
	case len(name) > MaxTopicNameLength:
		return &TopicNameError{Name: name[:32] + "...", Reason: fmt.Sprintf("%d characters, more than %d", len(name), MaxTopicNameLength)}
	}
	for i := 0; i < len(name); i++ {
		if !legalTopicByte(name[i]) {
			return &TopicNameError{Name: name, Reason: fmt.Sprintf("illegal character %q at byte %d; only [a-zA-Z0-9._-] are allowed", name[i], i)}
		}
	}
	return nil
}

func legalTopicByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// MetricsName returns the name Kafka uses to detect colliding topics: '.'
// replaced by '_'. Two topics whose metrics names are equal (say "a.b" and
// "a_b") should not coexist.
func MetricsName(topic string) string {
	return strings.ReplaceAll(topic, ".", "_")
}

// ID names one partition of a topic.
type ID struct {
	Topic     string
	Partition int32
}

// String returns "topic-partition", as Kafka names partition directories.
func (id ID) String() string {
	return id.Topic + "-" + strconv.FormatInt(int64(id.Partition), 10)
}

// Dir returns the directory of a partition's log, "<root>/<topic>-<p>". It
// validates the topic name first, so the result is always a direct child of
// root; p must be >= 0.
func Dir(root, topic string, p int32) (string, error) {
	if err := ValidateTopicName(topic); err != nil {
		return "", err
	}
	if p < 0 {
		return "", fmt.Errorf("%w: %d is negative", ErrInvalidPartition, p)
	}
	return filepath.Join(root, ID{Topic: topic, Partition: p}.String()), nil
}

// ParseDirName parses a partition directory name made by [Dir] ("orders-3")
// back into its ID. Topic names may contain '-': the partition is what
// follows the last one. It rejects anything Dir would not produce.
func ParseDirName(name string) (ID, error) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return ID{}, fmt.Errorf("%w: directory name %q has no -<partition> suffix", ErrInvalidPartition, name)
	}
	digits := name[i+1:]
	p, err := strconv.ParseInt(digits, 10, 32)
	// Only the canonical form: no sign, no leading zeros.
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != digits {
		return ID{}, fmt.Errorf("%w: directory name %q: bad partition %q", ErrInvalidPartition, name, digits)
	}
	if err := ValidateTopicName(name[:i]); err != nil {
		return ID{}, fmt.Errorf("directory name %q: %w", name, err)
	}
	return ID{Topic: name[:i], Partition: int32(p)}, nil
}
