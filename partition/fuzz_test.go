package partition

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzTopicName checks that validation never panics and that a valid name
// is a single path element with no '~' (the separator of the state
// machine's directory names, doc.go): joined to a root it is a direct
// child of it, named as the topic. Seeds are also in
// testdata/fuzz/FuzzTopicName.
func FuzzTopicName(f *testing.F) {
	for _, s := range []string{"orders", "valid.name_-1", "", ".", "..", "../x", "a/b", `a\b`, "...", strings.Repeat("a", 249), strings.Repeat("a", 250), "a-1", "a~1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateTopicName(name)
		if err != nil {
			if !errors.Is(err, ErrInvalidTopicName) {
				t.Fatalf("ValidateTopicName(%q) = %v, not ErrInvalidTopicName", name, err)
			}
			return
		}
		if strings.ContainsAny(name, `/\~`) || len(name) == 0 || len(name) > MaxTopicNameLength || name == "." || name == ".." {
			t.Fatalf("ValidateTopicName accepted %q", name)
		}
		root := filepath.FromSlash("/srv/logd/data/topics")
		dir := filepath.Join(root, name)
		if filepath.Dir(dir) != root || filepath.Base(dir) != name {
			t.Fatalf("%q joined to %q is %q, not a direct child named as the topic", name, root, dir)
		}
	})
}
