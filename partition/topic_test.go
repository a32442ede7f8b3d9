package partition

import (
	"errors"
	"path/filepath"
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
			if _, err := Dir("/data", tt.topic, 0); !errors.Is(err, ErrInvalidTopicName) {
				t.Errorf("Dir accepted invalid topic %q: %v", tt.topic, err)
			}
		})
	}
}

func TestDir(t *testing.T) {
	tests := []struct {
		name    string
		root    string
		topic   string
		p       int32
		want    string
		wantErr error
	}{
		{name: "absolute root", root: "/data", topic: "orders", p: 3, want: filepath.Join("/data", "orders-3")},
		{name: "relative root", root: "data", topic: "a.b", p: 0, want: filepath.Join("data", "a.b-0")},
		{name: "unclean root", root: "/data/../srv/", topic: "t", p: 12, want: filepath.Join("/srv", "t-12")},
		{name: "dashes in topic", root: "/d", topic: "my-topic-2", p: 2147483647, want: filepath.Join("/d", "my-topic-2-2147483647")},
		{name: "negative partition", root: "/d", topic: "t", p: -1, wantErr: ErrInvalidPartition},
		{name: "traversal", root: "/d", topic: "..", p: 1, wantErr: ErrInvalidTopicName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Dir(tt.root, tt.topic, tt.p)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || got != "" {
					t.Fatalf("Dir = %q, %v; want error %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Dir = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestIDAndParseDirName(t *testing.T) {
	tests := []struct {
		dir     string
		want    ID
		wantErr bool
	}{
		{dir: "orders-3", want: ID{Topic: "orders", Partition: 3}},
		{dir: "my-topic-0", want: ID{Topic: "my-topic", Partition: 0}},
		{dir: "...-7", want: ID{Topic: "...", Partition: 7}},
		{dir: "t-2147483647", want: ID{Topic: "t", Partition: 2147483647}},
		{dir: "orders", wantErr: true},
		{dir: "orders-", wantErr: true},
		{dir: "-3", wantErr: true},
		{dir: "..-3", wantErr: true},
		{dir: "orders-03", wantErr: true},
		{dir: "orders-+3", wantErr: true},
		{dir: "orders--3", want: ID{Topic: "orders-", Partition: 3}},
		{dir: "orders-2147483648", wantErr: true},
		{dir: "a/b-1", wantErr: true},
		{dir: "orders-3.deleted", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			got, err := ParseDirName(tt.dir)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseDirName(%q) = %+v, want an error", tt.dir, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseDirName(%q) = %+v, %v; want %+v", tt.dir, got, err, tt.want)
			}
			if got.String() != tt.dir {
				t.Errorf("String() = %q, want %q", got.String(), tt.dir)
			}
		})
	}
}

func TestMetricsName(t *testing.T) {
	if MetricsName("a.b_c.d") != "a_b_c_d" || MetricsName("a.b") != MetricsName("a_b") {
		t.Errorf("MetricsName does not fold '.' into '_'")
	}
}

func TestTopicNameErrorShortensLongNames(t *testing.T) {
	err := ValidateTopicName(strings.Repeat("x", 100000))
	if err == nil || len(err.Error()) > 200 {
		t.Errorf("error for a 100000-character name is %d characters long", len(err.Error()))
	}
}
