//go:build !linux

package kfd

import "os"

// readWhole reads a whole file.
func readWhole(path string) ([]byte, error) { return os.ReadFile(path) }
