package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// FakeRoot makes a root directory (for --sysfs-root and the like) holding
// files, path under the root -> content, and returns it; it is removed
// when the test ends.
func FakeRoot(t testing.TB, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// LinkRoot is FakeRoot of symbolic links: a root directory holding links,
// path under the root -> the link's target (a KFD tree or a host tree
// from testdata, unpacked once), removed when the test ends.
func LinkRoot(t testing.TB, links map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for at, target := range links {
		p := filepath.Join(root, at)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	return root
}
