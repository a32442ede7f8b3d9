// Package doctext reads the sections of the module's Markdown documents,
// for tests that check a document against the code (docs/guide.md's
// error reasons and exit codes): a test reads the section it needs by its
// heading, and fails naming the document and the heading when the section
// moved.
package doctext

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Section returns the lines of text under the line heading (such as
// "### Errors"), up to the next heading of its level or above, outside
// fenced code blocks; ok is false when text has no such heading.
func Section(text, heading string) (section string, ok bool) {
	level := strings.IndexFunc(heading, func(r rune) bool { return r != '#' })
	var out []string
	in, fenced := false, false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
		}
		if !fenced && strings.HasPrefix(l, "#") {
			n := strings.IndexFunc(l, func(r rune) bool { return r != '#' })
			switch {
			case l == heading:
				in = true
				continue
			case in && n > 0 && n <= level:
				return strings.Join(out, "\n"), true
			}
		}
		if in {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n"), in
}

// ReadSection returns the section under heading of the module's document
// rel (a slash-separated path from the module's root, such as
// "docs/guide.md"); it fails the test, naming both, when the document
// cannot be read or has no such heading.
func ReadSection(tb testing.TB, rel, heading string) string {
	tb.Helper()
	root, err := moduleRoot()
	if err != nil {
		tb.Fatalf("%v (the test reads its table from %s)", err, rel)
	}
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		tb.Fatalf("%v (the test reads its table from %s)", err, rel)
	}
	section, ok := Section(string(data), heading)
	if !ok {
		tb.Fatalf("%s has no %q section, where this test reads its table; if the section moved, point the test at its new place", rel, heading)
	}
	return section
}

// moduleRoot is the nearest directory at or above the working directory
// (a test's package directory) that holds go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("doctext: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("doctext: no go.mod at or above the working directory")
		}
		dir = parent
	}
}
