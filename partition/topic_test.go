package partition

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateTopicName(t *testing.T) {
	tests := []struct {
		name  string
		topic string
		valid bool
	}{
		{name: "simple", topic: "orders", valid: true},
		{name: "all legal characters", topic: "valid.name_-1", valid: true},
		{name: "mixed case and digits", topic: "AbC09", valid: true},
		{name: "three dots", topic: "...", valid: true},
		{name: "leading dot", topic: ".hidden", valid: true},
		{name: "max length", topic: strings.Repeat("a", 249), valid: true},
		{name: "empty", topic: ""},
		{name: "dot", topic: "."},
		{name: "dot dot", topic: ".."},
		{name: "too long", topic: strings.Repeat("a", 250)},
		{name: "parent traversal", topic: "../x"},
		{name: "slash", topic: "a/b"},
		{name: "backslash", topic: `a\b`},
		{name: "space", topic: "a b"},
		{name: "nul", topic: "a\x00b"},
		{name: "colon", topic: "a:b"},
		{name: "tilde", topic: "a~1"},
		{name: "non-ascii", topic: "café"},
		{name: "newline", topic: "a\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateTopicName(tt.topic)
			if tt.valid {
				if err != nil {
					t.Fatalf("ValidateTopicName(%q) = %v, want nil", tt.topic, err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidTopicName) {
				t.Fatalf("ValidateTopicName(%q) = %v, want ErrInvalidTopicName", tt.topic, err)
			}
			var tne *TopicNameError
			if !errors.As(err, &tne) || tne.Reason == "" {
				t.Errorf("error %v carries no reason", err)
			}
		})
	}
}

func TestTopicNameErrorShortensLongNames(t *testing.T) {
	err := ValidateTopicName(strings.Repeat("x", 100000))
	if err == nil || len(err.Error()) > 200 {
		t.Errorf("error for a 100000-character name is %d characters long", len(err.Error()))
	}
}
