package main_test

// Jobs amdrun hands to torch's own elastic agent (issue 23): a c10d
// rendezvous on several nodes, an elastic --nnodes MIN:MAX.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/testutil"
)

// patchedPython writes an interpreter wrapper for the tests only: run as
// `-m torch.distributed.run` it starts Debian's torch 1.13 agent with
// its one-function Python 3.11 fix (Std.from_str: iterating an IntFlag
// skips the zero and combined members there, so torchrun's default -r 0
// fails); anything else is the interpreter itself. The product never
// carries this.
func patchedPython(t *testing.T, py string) string {
	t.Helper()
	dir := t.TempDir()
	fix := `import re, sys
from torch.distributed.elastic.multiprocessing import api
def _from_str(vm):
    if re.fullmatch(r"\d", vm):
        return api.Std(int(vm))
    return {int(m.group(1)): api.Std(int(m.group(2))) for m in re.finditer(r"(\d):(\d)", vm)}
api.Std.from_str = staticmethod(_from_str)
from torch.distributed.run import main
sys.argv[0] = "torchrun"
main()
`
	if err := os.WriteFile(filepath.Join(dir, "agent_fix.py"), []byte(fix), 0o644); err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = -m ] && [ \"$2\" = torch.distributed.run ]; then shift 2; exec %s %s \"$@\"; fi\nexec %s \"$@\"\n",
		py, filepath.Join(dir, "agent_fix.py"), py)
	p := filepath.Join(dir, "python3")
	if err := os.WriteFile(p, []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestElasticRangeRunsThroughAgent: --nnodes 1:2 on one node (the agent
// waits out its last call and runs with the one node it has).
func TestElasticRangeRunsThroughAgent(t *testing.T) {
	testutil.EndToEnd(t)
	py := patchedPython(t, needTorch(t))
	out := t.TempDir()
	env := setEnv(cleanEnv(t, "OMP_NUM_THREADS=1", "LOGLEVEL=INFO"), "PYTHON_EXEC", py)
	args := []string{"--source", "example", "--no-lease", "--nnodes", "1:2", "--nproc-per-node", "2",
		"--rdzv-backend", "c10d", "--rdzv-endpoint", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"--rdzv-conf", "last_call_timeout=1", "--max-restarts", "1", checkScript(t), out}
	r := runAmdrun(t, env, args...)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	readReports(t, out, 2, r)
	// LOGLEVEL reaches the agent, which then says what it did (docs/torchrun.md).
	if !strings.Contains(r.stderr, "Rendezvous complete for workers") {
		t.Errorf("LOGLEVEL=INFO: no agent message on stderr:\n%s", r.stderr)
	}
}

// TestTwoAgentsOneHost: two amdrun "nodes" on one host, each handing a
// c10d rendezvous to torch's agent, 20 tries in a row. Torch names a node
// by host name and pid; each job's agent ran in a PID namespace of its
// own with the same small pid, both were one node to the rendezvous,
// which hung about one time in four (issue 33). Each job's namespace now
// numbers its processes from its keeper's pid outside (spreadPIDs).
func TestTwoAgentsOneHost(t *testing.T) {
	testutil.EndToEnd(t)
	py := patchedPython(t, needTorch(t))
	dir := t.TempDir()
	script := filepath.Join(dir, "node.py")
	os.WriteFile(script, []byte("import os\nprint('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'])\n"), 0o644)
	env := setEnv(cleanEnv(t, "OMP_NUM_THREADS=1"), "PYTHON_EXEC", py)
	for try := 0; try < 20; try++ {
		endpoint := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		var wg sync.WaitGroup
		out := make([][]byte, 2)
		errs := make([]error, 2)
		for n := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := exec.CommandContext(ctx, amdrunBin, "--source", "example", "--no-lease", "--nnodes", "2", "--nproc_per_node", "1",
					"--rdzv_id", fmt.Sprintf("try%d", try), "--rdzv_backend", "c10d", "--rdzv_endpoint", endpoint, script)
				cmd.Env = env
				out[n], errs[n] = cmd.CombinedOutput()
			}()
		}
		wg.Wait()
		timedOut := ctx.Err() != nil
		cancel()
		for n := range 2 {
			if errs[n] != nil || timedOut {
				t.Fatalf("try %d: node %d: %v (timed out: %v)\n%s", try, n, errs[n], timedOut, out[n])
			}
			if !strings.Contains(string(out[n]), "of 2") {
				t.Fatalf("try %d: node %d ran no rank of 2:\n%s", try, n, out[n])
			}
		}
	}
}
