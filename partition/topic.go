package partition

import "fmt"

// MaxTopicNameLength is Kafka's limit: 255 minus room for the partition
// suffix and ".deleted" marker of Kafka's directory names.
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
