package main_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
)

// TestBenchWithRocmBandwidthTestChangesTheChoice: amd-smi says every pair
// of the MI300X node is XGMI at 50000 MB/s; rocm_bandwidth_test (a fake
// one replaying a capture where GPU 3 measures a quarter of the others)
// run by `amdrun bench --tool rocm_bandwidth_test` is cached, and the next
// selection uses it: its score is the measured bandwidth and GPU 3 is left
// out. (That the measurement alone moves the choice, with busy state out
// of the way, is TestSelectionFollowsMeasurement in internal/discover.)
func TestBenchWithRocmBandwidthTestChangesTheChoice(t *testing.T) {
	testutil.EndToEnd(t)
	n := newFakeNode(t)
	n.serveAmdSmiMI300X()
	n.serve("rocm_bandwidth_test", testutil.Testdata(t, "rocm_bandwidth_test", "mi300x-8gpu-gpu3-degraded-v2.0.1.txt"))
	args := []string{"--source", "amd-smi", "--allow-busy", "--ngpus", "7", "x.py"}

	if r := runAmdrun(t, n.env, append([]string{"--dry-run", "--explain"}, args...)...); !strings.Contains(r.stdout, "bandwidth theoretical") ||
		!strings.Contains(r.stdout, "bottleneck 50000 MB/s") {
		t.Fatalf("before measuring, the score should be amd-smi's 50000 MB/s:\n%s%s", r.stdout, r.stderr)
	}
	if r := runAmdrun(t, n.env, append([]string{"--bandwidth", "measured", "--dry-run"}, args...)...); r.code == 0 || !strings.Contains(r.stderr, "run amdrun bench") {
		t.Fatalf("--bandwidth measured before any measurement: exit %d, %q", r.code, r.stderr)
	}

	r := runAmdrun(t, n.env, "--source", "amd-smi", "bench", "--tool", "rocm_bandwidth_test")
	if r.code != 0 || !strings.Contains(r.stdout, "Cached in") {
		t.Fatalf("bench --tool: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	measured := dryRun(t, n.env, args...)
	if slices.Contains(measured.Devices, 3) || !slices.Contains(measured.Devices, 5) {
		t.Errorf("measured choice %v: want GPU 3 (12 GB/s measured) left out and GPU 5 taken", measured.Devices)
	}
	r = runAmdrun(t, n.env, append([]string{"--dry-run", "--explain"}, args...)...)
	if !strings.Contains(r.stdout, "bandwidth measured") || strings.Contains(r.stdout, "chosen  bottleneck 50000") {
		t.Errorf("--explain should say the measured bandwidth was used:\n%s", r.stdout)
	}
}
