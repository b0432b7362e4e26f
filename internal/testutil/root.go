package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// FakeRoot makes a temporary root directory holding files, path ->
// content.
func FakeRoot(t testing.TB, files map[string]string) string {
	t.Helper()
	return makeRoot(t, files, func(p, content string) error { return os.WriteFile(p, []byte(content), 0o644) })
}

// LinkRoot is FakeRoot of symbolic links, path -> target.
func LinkRoot(t testing.TB, links map[string]string) string {
	t.Helper()
	return makeRoot(t, links, func(p, target string) error { return os.Symlink(target, p) })
}

// makeRoot makes each path of entries under a new temporary root.
func makeRoot(t testing.TB, entries map[string]string, create func(p, v string) error) string {
	t.Helper()
	root := t.TempDir()
	for at, v := range entries {
		p := filepath.Join(root, at)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := create(p, v); err != nil {
			t.Fatal(err)
		}
	}
	return root
}
