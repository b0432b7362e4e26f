//go:build !linux

package kfd

import "os"

func readWhole(path string) ([]byte, error) { return os.ReadFile(path) }
