package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/internal/doctext"
)

// TestDemo runs the whole walk-through against a freshly built logd, as
// `make demo` does. It takes a few seconds once the build is cached; -short
// skips it.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the demo builds and runs a real logd")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	bin, err := buildLogd(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(ctx, &out, config{logd: bin, verbose: true}); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "every observation held") {
		t.Fatalf("demo output:\n%s", out.String())
	}
	if testing.Verbose() {
		os.Stdout.Write(out.Bytes())
	}
}

// TestDocsCountStories: the README's "through N stories" and the guide's
// ordinal of the outbox story match the stories the demo runs.
func TestDocsCountStories(t *testing.T) {
	numbers := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"}
	ordinals := []string{"zeroth", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh", "twelfth"}
	quickStart := strings.Join(strings.Fields(doctext.ReadSection(t, "README.md", "## Quick start")), " ")
	m := regexp.MustCompile(`walks through (\w+) stories`).FindStringSubmatch(quickStart)
	if m == nil {
		t.Fatalf("README.md, \"Quick start\", does not say \"walks through N stories\" (make demo runs %d); say so, or point this test at what it says now:\n%.300s", len(stories), quickStart)
	}
	if i := slices.Index(numbers, m[1]); i != len(stories) {
		t.Errorf(`README.md, "Quick start": "walks through %s stories"; make demo runs %d`, m[1], len(stories))
	}
	outbox := slices.IndexFunc(stories, func(s story) bool { return strings.Contains(s.title, "outbox") }) + 1
	guide := strings.Join(strings.Fields(doctext.ReadSection(t, "docs/guide.md", "## Effectively once, end to end")), " ")
	if want := "`make demo`'s " + ordinals[outbox] + " story runs both"; !strings.Contains(guide, want) {
		t.Errorf(`docs/guide.md, "Effectively once, end to end", lacks %q (the outbox story is number %d)`, want, outbox)
	}
}
