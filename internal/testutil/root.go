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
