package partition

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzTopicName checks that validation never panics, that a valid name
// never contains a path separator, that Dir of a valid name is a direct
// child of root, and that ParseDirName inverts it. Seeds are also in
// testdata/fuzz/FuzzTopicName.
func FuzzTopicName(f *testing.F) {
	for _, s := range []string{"orders", "valid.name_-1", "", ".", "..", "../x", "a/b", `a\b`, "...", strings.Repeat("a", 249), strings.Repeat("a", 250), "a-1"} {
		f.Add(s, int32(0))
	}
	f.Fuzz(func(t *testing.T, name string, p int32) {
		root := filepath.FromSlash("/srv/logd/data")
		err := ValidateTopicName(name)
		dir, dirErr := Dir(root, name, p)
		if err != nil {
			if !errors.Is(err, ErrInvalidTopicName) {
				t.Fatalf("ValidateTopicName(%q) = %v, not ErrInvalidTopicName", name, err)
			}
			if dirErr == nil {
				t.Fatalf("Dir accepted invalid name %q", name)
			}
			return
		}
		if strings.ContainsAny(name, `/\`) || len(name) == 0 || len(name) > MaxTopicNameLength || name == "." || name == ".." {
			t.Fatalf("ValidateTopicName accepted %q", name)
		}
		if p < 0 {
			if !errors.Is(dirErr, ErrInvalidPartition) {
				t.Fatalf("Dir(%q, %d) = %q, %v; want ErrInvalidPartition", name, p, dir, dirErr)
			}
			return
		}
		if dirErr != nil {
			t.Fatalf("Dir(%q, %d): %v", name, p, dirErr)
		}
		if filepath.Dir(dir) != root {
			t.Fatalf("Dir(%q, %d) = %q, not a direct child of %q", name, p, dir, root)
		}
		rel, err := filepath.Rel(root, dir)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || rel == "." {
			t.Fatalf("Dir(%q, %d) = %q escapes %q", name, p, dir, root)
		}
		id, err := ParseDirName(filepath.Base(dir))
		if err != nil || id != (ID{Topic: name, Partition: p}) {
			t.Fatalf("ParseDirName(%q) = %+v, %v", filepath.Base(dir), id, err)
		}
	})
}
