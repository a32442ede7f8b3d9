package archtest

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// layoutEntry is a bullet of the README's Layout section: "- [`name/`](…)".
var layoutEntry = regexp.MustCompile("^- \\[`([^`/]+)/`\\]")

// TestReadmeLayout checks that the README's Layout section lists every
// top-level directory of the repository, and only those: the front page's
// map cannot drift from the tree. Directories the repository ignores
// (.gitignore's "/name/" lines, such as bin/) and .git are not listed.
func TestReadmeLayout(t *testing.T) {
	readme, err := os.ReadFile(moduleDoc("README.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed, err := readmeLayout(string(readme))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	ignored := map[string]bool{".git": true}
	if gi, err := os.ReadFile(moduleDoc(".gitignore")); err == nil {
		for _, l := range strings.Split(string(gi), "\n") {
			if name, ok := strings.CutPrefix(strings.TrimSpace(l), "/"); ok && strings.HasSuffix(name, "/") && strings.Count(name, "/") == 1 {
				ignored[strings.TrimSuffix(name, "/")] = true
			}
		}
	}
	entries, err := os.ReadDir(moduleDoc("."))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && !ignored[e.Name()] {
			dirs = append(dirs, e.Name())
		}
	}
	for _, d := range dirs {
		if !slices.Contains(listed, d) {
			t.Errorf("README.md's Layout section has no line for the top-level directory %s/; add one saying what it holds", d)
		}
	}
	for _, l := range listed {
		if !slices.Contains(dirs, l) {
			t.Errorf("README.md's Layout section lists %s/, which is not a top-level directory of the repository", l)
		}
	}
}

// readmeLayout returns the directories the "## Layout" section of the
// README lists, in its order.
func readmeLayout(text string) ([]string, error) {
	lines := strings.Split(text, "\n")
	start := slices.Index(lines, "## Layout")
	if start < 0 {
		return nil, errNoLayout
	}
	var out []string
	for _, l := range lines[start+1:] {
		if strings.HasPrefix(l, "## ") {
			break
		}
		if m := layoutEntry.FindStringSubmatch(l); m != nil {
			out = append(out, m[1])
		}
	}
	if len(out) == 0 {
		return nil, errNoLayout
	}
	return out, nil
}

var errNoLayout = errors.New("no \"## Layout\" section with \"- [`name/`](name)\" lines; this test reads the map of the tree there")
