package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// BenchmarkAmdrunLaunch times a whole amdrun run, from exec to exit, on
// the bundled topology: start, plan, lease, start N workers, reap them.
// Workers are `true` (launcher overhead alone) or python3 importing os
// (what "user code starts" costs with a Python worker).
func BenchmarkAmdrunLaunch(b *testing.B) {
	lease := b.TempDir()
	for _, worker := range []string{"true", "python-import-os"} {
		for _, n := range []int{1, 2, 8} {
			b.Run(fmt.Sprintf("%s/N=%d", worker, n), func(b *testing.B) {
				args := []string{"--source", "example", "--ngpus", fmt.Sprint(n), "--no-python"}
				if worker == "true" {
					args = append(args, "true")
				} else {
					args = append(args, pythonPath(), "-c", "import os")
				}
				for b.Loop() {
					cmd := exec.Command(amdrunBin, args...)
					cmd.Env = append(os.Environ(), "AMDRUN_LEASE_DIR="+lease, "OMP_NUM_THREADS=1")
					if out, err := cmd.CombinedOutput(); err != nil {
						b.Fatalf("%v: %s", err, out)
					}
				}
			})
		}
	}
}
