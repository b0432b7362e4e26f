package main_test

import (
	"github.com/amdrun/amdrun/internal/testutil"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchCommandWithFakeProbe runs `amdrun bench` end to end with a
// stand-in for python3 that answers the probe protocol (one JSON line per
// figure) for the devices amdrun made visible: the progress lines, the
// matrix, the cache, and the next selection using it.
func TestBenchCommandWithFakeProbe(t *testing.T) {
	testutil.EndToEnd(t)
	dir := t.TempDir()
	fake := filepath.Join(dir, "fakepython")
	// argv: fakepython -c PROBE MODE SIZE ITERS; devices from CUDA_VISIBLE_DEVICES.
	script := "#!" + pythonPath() + `
import json, os, sys
mode = sys.argv[3]
devs = os.environ["CUDA_VISIBLE_DEVICES"].split(",")
n = len(devs)
if mode == "d2d":
    print(json.dumps({"kind": "plan", "pairs": n * (n - 1), "devices": n}))
    for a in range(n):
        for b in range(n):
            if a != b:
                # device 1 (runtime index 1) is slow in every direction
                slow = devs[a] == "1" or devs[b] == "1"
                print(json.dumps({"kind": "d2d", "a": a, "b": b, "mbps": 9000 if slow else 180000}))
else:
    print(json.dumps({"kind": "plan", "pairs": n, "devices": n}))
    for b in range(n):
        print(json.dumps({"kind": "h2d", "dev": b, "mbps": 50000}))
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	env := setEnv(cleanEnv(t, "OMP_NUM_THREADS=1"), "XDG_CACHE_HOME", t.TempDir())
	before := dryRun(t, env, "--source", "example", "-n", "2", "x.py")
	if before.VisibleDevices != "0,1" {
		t.Fatalf("theoretical choice %q, want 0,1", before.VisibleDevices)
	}
	r := runAmdrun(t, env, "--source", "example", "bench", "--python", fake, "--devices", "0-3")
	if r.code != 0 {
		t.Fatalf("bench: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	collapsed := strings.Join(strings.Fields(r.stdout), " ")
	for _, want := range []string{"GPU0 X 9.0 180.0 180.0", "GPU1 9.0 X 9.0 9.0", "Cached in"} {
		if !strings.Contains(collapsed, want) {
			t.Errorf("bench output lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "16/16 figures") || !strings.Contains(collapsed, "node 0 50.0 50.0 50.0 50.0") {
		t.Errorf("want 12 device-to-device and 4 host-to-device figures (probe bound to NUMA node 0 through the shim):\n%s%s", r.stdout, r.stderr)
	}
	after := dryRun(t, env, "--source", "example", "-n", "2", "--devices", "0-3", "x.py")
	if after.VisibleDevices == "0,1" || strings.Contains(after.VisibleDevices, "1") {
		t.Errorf("after measuring device 1 at 9 GB/s the choice is %q; want a pair without it", after.VisibleDevices)
	}
	if r := runAmdrun(t, env, "--source", "example", "--bandwidth", "theoretical", "-n", "2", "--dry-run", "--json", "x.py"); !strings.Contains(r.stdout, `"visible_devices": "0,1"`) {
		t.Errorf("--bandwidth theoretical should ignore the measurement:\n%s", r.stdout)
	}
}
