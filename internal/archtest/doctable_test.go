package archtest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// archDoc is the document whose Packages table the test reads, relative
// to the module's root.
const archDoc = "docs/architecture.md"

// docTable is the Packages table of a document: the module-relative path
// of each row's first cell, in the document's order.
type docTable struct {
	name  string // the document, for messages
	paths []string
}

// readDocTable reads the Packages table of the document at path, named
// name in messages.
func readDocTable(path, name string) (docTable, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return docTable{}, fmt.Errorf("read the Packages table: %w", err)
	}
	paths, err := parseDocTable(string(text))
	if err != nil {
		return docTable{}, fmt.Errorf("%s: %w", name, err)
	}
	return docTable{name: name, paths: paths}, nil
}

// parseDocTable returns the packages the "## Packages" section of a
// Markdown document lists: the first cell of each row of its first table
// (header and separator rows aside), `server/` read as server.
func parseDocTable(text string) ([]string, error) {
	lines := strings.Split(text, "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.TrimSpace(l) == "## Packages" })
	if start < 0 {
		return nil, fmt.Errorf(`no "## Packages" section; the architecture test reads the table of packages there`)
	}
	var paths []string
	inTable := false
	for _, l := range lines[start+1:] {
		if strings.HasPrefix(l, "## ") {
			break
		}
		if !strings.HasPrefix(l, "|") {
			if inTable {
				break // the first table ends
			}
			continue
		}
		if !inTable { // the header row; the separator follows
			inTable = true
			continue
		}
		cells := strings.Split(l, "|")
		cell := strings.TrimSpace(cells[1])
		if strings.Trim(cell, "-: ") == "" {
			continue
		}
		paths = append(paths, strings.TrimSuffix(strings.Trim(cell, "`"), "/"))
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf(`the "## Packages" section has no table rows`)
	}
	return paths, nil
}

// documented: every package of the module has a row in the document's
// Packages table, and the document and the test's table name the same
// packages, so neither can drift from the other.
func (c *checker) documented() []string {
	var out []string
	doc := map[string]int{}
	for _, p := range c.doc.paths {
		doc[p]++
		if doc[p] == 2 {
			out = append(out, fmt.Sprintf("%s: package %s has more than one row in the Packages table", c.doc.name, p))
		}
	}
	own := map[string]bool{}
	for _, p := range c.g.own() {
		rel := c.g.rel(p.ImportPath)
		own[rel] = true
		if doc[rel] == 0 {
			out = append(out, fmt.Sprintf("no row in %s: package %s is not in the document's Packages table; add a row saying what it holds and its invariants (its package comment has them)", c.doc.name, rel))
		}
	}
	table := map[string]bool{}
	for _, r := range c.rows {
		table[r.path] = true
		if doc[r.path] == 0 && !own[r.path] {
			out = append(out, fmt.Sprintf("the table of internal/archtest/arch_test.go has a row for %s, the Packages table of %s has none; the two tables name the same packages", r.path, c.doc.name))
		}
	}
	for p := range doc {
		if !table[p] {
			out = append(out, fmt.Sprintf("the Packages table of %s has a row for %s, the table of internal/archtest/arch_test.go has none; the two tables name the same packages", c.doc.name, p))
		}
	}
	slices.Sort(out)
	return out
}

// moduleDoc returns the path of a document of the module from the
// directory of this package's test (internal/archtest).
func moduleDoc(rel string) string {
	return filepath.Join("..", "..", filepath.FromSlash(rel))
}
