package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestWriteData is the table of encode.go's rules, in JSON and YAML.
func TestWriteData(t *testing.T) {
	type inner struct {
		Age time.Duration `json:"age_ms"`
	}
	type sample struct {
		Name    string            `json:"name"`
		Wait    time.Duration     `json:"wait_ms"`
		List    []string          `json:"list"`
		Skipped []string          `json:"skipped,omitempty"`
		When    time.Time         `json:"when,omitzero"`
		Ptr     *int              `json:"ptr"`
		Config  map[string]string `json:"config"`
		Hidden  string            `json:"-"`
		inner
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name    string
		in      any
		json    string
		yaml    string
		wantErr string
	}{
		{
			name: "durations in ms, nil list empty, order kept",
			in:   sample{Name: "a b", Wait: 1500 * time.Millisecond, inner: inner{Age: time.Minute}, Hidden: "x"},
			json: "{\n  \"name\": \"a b\",\n  \"wait_ms\": 1500,\n  \"list\": [],\n  \"ptr\": null,\n  \"config\": {},\n  \"age_ms\": 60000\n}\n",
			yaml: "name: a b\nwait_ms: 1500\nlist: []\nptr: null\nconfig: {}\nage_ms: 60000\n",
		},
		{
			name: "times, maps sorted, lists of objects",
			in:   []any{sample{Name: "n", When: at, List: []string{"yes", "x"}, Config: map[string]string{"b": "2", "a": "1"}}},
			json: "[\n  {\n    \"name\": \"n\",\n    \"wait_ms\": 0,\n    \"list\": [\n      \"yes\",\n      \"x\"\n    ],\n    \"when\": \"2026-01-02T03:04:05Z\",\n    \"ptr\": null,\n    \"config\": {\n      \"a\": \"1\",\n      \"b\": \"2\"\n    },\n    \"age_ms\": 0\n  }\n]\n",
			yaml: "- name: \"n\"\n  wait_ms: 0\n  list:\n    - \"yes\"\n    - x\n  when: \"2026-01-02T03:04:05Z\"\n  ptr: null\n  config:\n    a: \"1\"\n    b: \"2\"\n  age_ms: 0\n",
		},
		{
			name: "a duration without a unit in its name",
			in: struct {
				Lag time.Duration `json:"lag"`
			}{},
			wantErr: `output field "lag" holds a duration: its name must end in _ms`,
		},
		{
			name: "empty list",
			in:   []int(nil),
			json: "[]\n",
			yaml: "[]\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, format := range []string{outputJSON, outputYAML} {
				var b bytes.Buffer
				err := writeData(&b, format, tt.in)
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("%s: error %v, want %q", format, err, tt.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", format, err)
				}
				want := tt.json
				if format == outputYAML {
					want = tt.yaml
				}
				if b.String() != want {
					t.Errorf("%s:\n%s\nwant:\n%s", format, b.String(), want)
				}
			}
		})
	}
}

// TestVersionYAML: logctl version takes -o yaml like every command.
func TestVersionYAML(t *testing.T) {
	r := mustRun(t, nil, "", "version", "-o", "yaml")
	if !strings.HasPrefix(r.stdout, "version: ") || !strings.Contains(r.stdout, "\ncommit: ") {
		t.Fatalf("version -o yaml printed %q", r.stdout)
	}
}
