// Package testutil finds the repository's test data and the shared real
// fixtures for tests. It is imported only from _test.go files.
package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// RepoRoot returns the directory holding go.mod, walking up from the
// test's working directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// Testdata returns the path of elem under the repository's testdata/.
func Testdata(t testing.TB, elem ...string) string {
	t.Helper()
	return filepath.Join(append([]string{RepoRoot(t), "testdata"}, elem...)...)
}

// Shared returns the path of elem under the read-only shared/ directory
// that sits beside the repository (override with AMDRUN_SHARED). The test
// fails when shared/ is missing: CI always has it.
func Shared(t testing.TB, elem ...string) string {
	t.Helper()
	dir := os.Getenv("AMDRUN_SHARED")
	if dir == "" {
		dir = filepath.Join(RepoRoot(t), "..", "shared")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("shared fixtures not found at %s (set AMDRUN_SHARED): %v", dir, err)
	}
	return filepath.Join(append([]string{dir}, elem...)...)
}

// ReadFile reads path or fails the test.
func ReadFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
