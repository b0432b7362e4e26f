package main_test

import (
	"github.com/amdrun/amdrun/internal/testutil"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNUMABalancingSetForTheJobAndRestored: --numa-balancing off sets
// kernel.numa_balancing (here in a fake /proc under --sysfs-root) to 0 for
// the job, as the ranks see it, and puts the old value back afterwards,
// also when a rank fails.
func TestNUMABalancingSetForTheJobAndRestored(t *testing.T) {
	testutil.EndToEnd(t)
	root := t.TempDir()
	knob := filepath.Join(root, "proc", "sys", "kernel", "numa_balancing")
	os.MkdirAll(filepath.Dir(knob), 0o755)
	out := t.TempDir()
	script := filepath.Join(out, "w.py")
	// Each rank exits once both have said what they saw: the first rank
	// to fail stops the other, which could be mid-write (CI saw "").
	os.WriteFile(script, []byte(`import os, sys, time
v, d, rank = open(sys.argv[1]).read(), sys.argv[2], os.environ["RANK"]
with open(os.path.join(d, ".seen" + rank), "w") as f:
    f.write(v)
os.rename(os.path.join(d, ".seen" + rank), os.path.join(d, "seen" + rank))
while not (os.path.exists(os.path.join(d, "seen0")) and os.path.exists(os.path.join(d, "seen1"))):
    time.sleep(0.01)
sys.exit(int(sys.argv[3]))
`), 0o644)
	for _, code := range []string{"0", "5"} {
		os.WriteFile(knob, []byte("1\n"), 0o644)
		os.Remove(filepath.Join(out, "seen0"))
		os.Remove(filepath.Join(out, "seen1"))
		r := runAmdrun(t, cleanEnv(t), "--source", "example", "--sysfs-root", root, "--numa-balancing", "off",
			"--ngpus", "2", "--python", pythonPath(), script, knob, out, code)
		if r.stdout+r.stderr == "" && r.code != 0 {
			t.Fatalf("no output, exit %d", r.code)
		}
		if want := map[string]int{"0": 0, "5": 5}[code]; r.code != want {
			t.Fatalf("exit %d, want %d\n%s", r.code, want, r.stderr)
		}
		for _, rank := range []string{"0", "1"} {
			b, err := os.ReadFile(filepath.Join(out, "seen"+rank))
			if err != nil || strings.TrimSpace(string(b)) != "0" {
				t.Errorf("rank %s saw numa_balancing %q (%v), want 0 during the job", rank, b, err)
			}
		}
		if b, _ := os.ReadFile(knob); string(b) != "1\n" {
			t.Errorf("after the job (rank exit %s) numa_balancing is %q, want the old 1 restored", code, b)
		}
	}
	// A knob the kernel does not have: one clear error before anything starts.
	os.Remove(knob)
	os.Remove(filepath.Join(out, "seen0"))
	r := runAmdrun(t, cleanEnv(t), "--source", "example", "--sysfs-root", root, "--numa-balancing", "off",
		"--ngpus", "2", "--python", pythonPath(), script, knob, out, "0")
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	last := lines[len(lines)-1]
	if r.code == 0 || !strings.HasPrefix(last, "amdrun: numa balancing not supported") {
		t.Errorf("missing knob: exit %d, want one error line; stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "seen0")); err == nil {
		t.Error("a rank started although the knob could not be set")
	}
}
