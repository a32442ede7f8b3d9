package doctext

import "testing"

func TestSection(t *testing.T) {
	const doc = "# T\n\n## A\none\n### A1\ntwo\n```sh\n# a comment, not a heading\n```\n## B\nthree\n"
	for _, tc := range []struct {
		heading, want string
		ok            bool
	}{
		{"## A", "one\n### A1\ntwo\n```sh\n# a comment, not a heading\n```", true},
		{"### A1", "two\n```sh\n# a comment, not a heading\n```", true},
		{"## B", "three\n", true},
		{"## C", "", false},
	} {
		got, ok := Section(doc, tc.heading)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Section(%q) = %q, %v; want %q, %v", tc.heading, got, ok, tc.want, tc.ok)
		}
	}
}

func TestReadSection(t *testing.T) {
	// This package's own directory is below the module's root, as every
	// test's is.
	if got := ReadSection(t, "docs/guide.md", "## Make targets"); got == "" {
		t.Error("docs/guide.md's Make targets section is empty")
	}
}
