package main_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
)

// slurmStepEnv is the environment of a published Slurm step
// (testdata/slurm/env/NAME, see testdata/SOURCES.md) without the
// variables named in drop.
func slurmStepEnv(t *testing.T, name string, drop ...string) []string {
	t.Helper()
	var env []string
	for _, line := range strings.Split(string(testutil.ReadFile(t, testutil.Testdata(t, "slurm", "env", name))), "\n") {
		k, _, ok := strings.Cut(line, "=")
		if ok && !slices.Contains(drop, k) {
			env = append(env, line)
		}
	}
	return env
}

// TestSlurmGrantBoundsDevices is issue 24's report through the binary:
// a 1-GPU Slurm step (Stanford Sherlock's, granted GPU 7) on an 8-GPU
// node that shows all its GPUs (no device cgroup) and has no
// visible-device variable. amdrun started 8 ranks, one per GPU of the
// node; it must start one, on GPU 7.
func TestSlurmGrantBoundsDevices(t *testing.T) {
	testutil.EndToEnd(t)
	n := newFakeNode(t)
	n.serveNvidia("hgx-h100-8gpu")
	step := slurmStepEnv(t, "published-sherlock-h200-step-1gpu.env", "CUDA_VISIBLE_DEVICES")

	// Outside Slurm the same node gives every free GPU a rank.
	if p := dryRun(t, n.env, "--source", "nvidia-smi", "x.py"); len(p.Ranks) != 8 {
		t.Fatalf("outside Slurm: %d ranks on %v; want 8", len(p.Ranks), p.Devices)
	}
	p := dryRun(t, append(slices.Clone(n.env), step...), "--source", "nvidia-smi", "x.py")
	if !slices.Equal(p.Devices, []int{7}) || len(p.Ranks) != 1 || p.Ranks[0].Env["CUDA_VISIBLE_DEVICES"] != "7" {
		t.Fatalf("in the step granted GPU 7: devices %v, %d ranks, rank 0 CUDA_VISIBLE_DEVICES=%q; want one rank on device 7",
			p.Devices, len(p.Ranks), p.Ranks[0].Env["CUDA_VISIBLE_DEVICES"])
	}
	// Asking for more than the grant is refused in one line.
	r := runAmdrun(t, append(slices.Clone(n.env), step...), "--source", "nvidia-smi", "--ngpus", "2", "--dry-run", "x.py")
	if r.code != 1 {
		t.Fatalf("--ngpus 2 in a 1-GPU step: exit %d, want 1\n%s", r.code, r.stderr)
	}
	oneErrorLine(t, r)
}

// TestSlurmGrantedStepWithoutGPU: a step granted GPUs where amdrun
// finds none (here: no vendor tool, no KFD) is an error of one line and
// exit 1; before issue 24 it ran one CPU rank and exited 0 with a
// warning. An explicit --ngpus 0 still runs CPU ranks.
func TestSlurmGrantedStepWithoutGPU(t *testing.T) {
	testutil.EndToEnd(t)
	env := append(toolEnv(t, systemPath()), slurmStepEnv(t, "published-sherlock-h200-step-1gpu.env")...)
	empty := t.TempDir()
	r := runAmdrun(t, env, "--sysfs-root", empty, "--no-python", "true")
	if r.code != 1 {
		t.Fatalf("granted step without a GPU: exit %d, want 1\n%s", r.code, r.stderr)
	}
	if line := oneErrorLine(t, r); !strings.HasPrefix(line, "amdrun: slurm granted this task GPUs (SLURM_STEP_GPUS=7) but amdrun finds none: no GPU found") ||
		!strings.Contains(line, "--ngpus 0") {
		t.Errorf("error %q: want it to name the grant, say no GPU was found and point at --ngpus 0", line)
	}
	r = runAmdrun(t, env, "--sysfs-root", empty, "--ngpus", "0", "--no-python", "true")
	if r.code != 0 || !strings.Contains(r.stderr, "amdrun: warning: no GPU found on this machine: running 1 CPU rank(s)") {
		t.Errorf("--ngpus 0 in a granted step without a GPU: exit %d, stderr %q; want 0 and the CPU-rank warning", r.code, r.stderr)
	}
}
