package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

// bindReport is a worker that writes its LOCAL_RANK's
// Cpus_allowed_list (from its own /proc/self/status) to OUT/cpus-LR.
const bindReport = `import os, sys
lr = os.environ["LOCAL_RANK"]
for line in open("/proc/self/status"):
    if line.startswith("Cpus_allowed_list:"):
        cpus = line.split(":", 1)[1].strip()
with open(os.path.join(sys.argv[1], "cpus-" + lr), "w") as f:
    f.write(cpus + " " + os.environ.get("TORCHELASTIC_RESTART_COUNT", "?"))
`

// TestAgentWorkersBoundByLocalRank: an elastic line (--nnodes 1:2,
// c10d) goes to torch's agent; with --numa-binding exclusive each of
// its two workers still gets the CPUs the plan gives its LOCAL_RANK
// (here CPU 0 and CPU 1): the agent starts them through amdrun's bind
// shim, which binds by LOCAL_RANK and execs the worker.
func TestAgentWorkersBoundByLocalRank(t *testing.T) {
	testutil.EndToEnd(t)
	nodes, _ := filepath.Glob("/sys/devices/system/node/node*/cpulist")
	if len(nodes) != 1 {
		t.Skipf("needs one NUMA node, has %d", len(nodes))
	}
	py := patchedPython(t, needTorch(t))
	out := t.TempDir()
	script := filepath.Join(out, "report.py")
	if err := os.WriteFile(script, []byte(bindReport), 0o644); err != nil {
		t.Fatal(err)
	}
	env := setEnv(cleanEnv(t, "OMP_NUM_THREADS=1"), "PYTHON_EXEC", py)
	line := []string{"--ngpus", "0", "--nproc-per-node", "2", "--numa-binding", "exclusive", "--nnodes", "1:2",
		"--rdzv-backend", "c10d", "--rdzv-endpoint", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"--rdzv-conf", "last_call_timeout=1", script, out}
	plan := runAmdrun(t, env, append([]string{"--dry-run", "--json"}, line...)...)
	var p struct {
		Ranks []struct {
			LocalRank int   `json:"local_rank"`
			CPUs      []int `json:"cpus"`
		} `json:"ranks"`
	}
	launcher, doc, _ := strings.Cut(plan.stdout, "\n") // the agent's command line, then the JSON
	if !strings.HasPrefix(launcher, "Launcher: ") || !strings.Contains(launcher, " --no_python ") || strings.Contains(launcher, "--numa_binding") {
		t.Errorf("the agent does not start the workers through the shim (or binds them itself):\n%s", launcher)
	}
	if err := json.Unmarshal([]byte(doc), &p); err != nil || len(p.Ranks) != 2 {
		t.Fatalf("dry run: %v, %d ranks\n%s%s", err, len(p.Ranks), plan.stdout, plan.stderr)
	}
	r := runAmdrun(t, env, line...)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "torch's elastic agent") {
		t.Errorf("no line says the agent runs the job:\n%s", r.stderr)
	}
	seen := map[string]bool{}
	for _, rk := range p.Ranks {
		b, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("cpus-%d", rk.LocalRank)))
		if err != nil {
			t.Fatalf("local rank %d wrote nothing: %v\n%s", rk.LocalRank, err, r.stderr)
		}
		got, _, _ := strings.Cut(string(b), " ")
		want := topology.FormatCPUList(rk.CPUs)
		if want == "" || got != want {
			t.Errorf("local rank %d: Cpus_allowed_list %q, the plan says %q", rk.LocalRank, got, want)
		}
		seen[got] = true
	}
	if len(seen) != 2 {
		t.Errorf("the two workers share CPUs: %v", seen)
	}
}
