package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/testutil"
)

// fakeTorch is a torch package of three files that says it is 2.11 and
// has what amdrun's bootstrap calls for the flight recorder: each rank's
// recorder holds all_reduce #1 and #2, rank 2's only #1. It refuses to
// dump unless the plan switched the recorder on (TORCH_FR_BUFFER_SIZE).
var fakeTorch = map[string]string{
	"torch/version.py":              "__version__ = '2.11.0'\n",
	"torch/distributed/__init__.py": "def is_initialized():\n    return True\n",
	"torch/__init__.py": `import os, pickle, types

def _dump(collectives, stacks, only_active):
    if os.environ.get("TORCH_FR_BUFFER_SIZE") != "2000":
        raise RuntimeError("the flight recorder is off")
    last = 1 if os.environ["RANK"] == "2" else 2
    e = lambda s: {"process_group": ("0", "default_pg"), "pg_id": 0, "collective_seq_id": s, "is_p2p": False,
                   "profiling_name": "gloo:all_reduce", "state": "scheduled", "input_sizes": [[4]], "output_sizes": [[4]]}
    return pickle.dumps({"version": "2.10", "pg_status": {"0": {"last_completed_collective": 1}},
                         "entries": [e(s) for s in range(1, last + 1)]})

_C = types.SimpleNamespace(_distributed_c10d=types.SimpleNamespace(_dump_fr_trace=_dump))
`,
}

// TestStallReadsFlightRecorder (issue 33.4): on a stall amdrun asks every
// rank for torch's flight recorder (the bootstrap's second signal), reads
// the dumps with the ranks' interpreter, says in its report which
// collective ranks 0,1,3 wait in and that rank 2 never entered it, and
// keeps the dumps in the log directory. The torch is a fake of three
// files (Debian's 1.13 has no recorder): what is checked is amdrun's side,
// from the plan's variables to the paragraph.
func TestStallReadsFlightRecorder(t *testing.T) {
	testutil.EndToEnd(t)
	dir := writeFakeTorch(t)
	script := filepath.Join(dir, "job.py")
	if err := os.WriteFile(script, []byte("import time, torch.distributed\nprint('ready', flush=True)\ntime.sleep(120)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(dir, "logs")
	env := cleanEnv(t, "OMP_NUM_THREADS=1", "PYTHONPATH="+filepath.Join(dir, "lib"))
	j := startJob(t, env, "--source", "example", "--no-lease", "--ngpus", "0", "--nproc-per-node", "4",
		"--python", pythonPath(), "--grace", "3s", "--stall-timeout", "2s", "--on-stall", "stop", "--log-dir", logs, script)
	j.when(t, "amdrun: the job stalled", 1, 2*time.Minute)
	if code := j.wait(t, time.Minute); code != 124 {
		t.Errorf("exit code %d, want 124 (stalled)", code)
	}
	const want = "amdrun: torch's flight recorder: process group 0 (default_pg): ranks 0,1,3 wait in gloo:all_reduce #2 (sizes [[4]]), after gloo:all_reduce #1 (sizes [[4]]); rank 2 never entered #2: last entered gloo:all_reduce #1 (sizes [[4]]), completed.\n"
	out := j.text()
	if !strings.Contains(out, want) || strings.Index(out, want) > strings.Index(out, "amdrun: stopping the worker group") {
		t.Errorf("no flight recorder paragraph in the stall report, want %q:\n%s", want, out)
	}
	kept, _ := filepath.Glob(filepath.Join(logs, "*", "fr_attempt_0_rank_*"))
	if len(kept) != 4 {
		t.Errorf("%d dumps kept in the log directory, want 4: %v", len(kept), kept)
	}
}

// writeFakeTorch writes fakeTorch under DIR/lib and returns DIR.
func writeFakeTorch(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range fakeTorch {
		p := filepath.Join(dir, "lib", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestDryRunShowsFlightRecorder: the dry run shows the flight recorder's
// variables for a torch that has it (the fake 2.11), none for one that
// has not (the python3 here without the fake: Debian's 1.13, or none).
func TestDryRunShowsFlightRecorder(t *testing.T) {
	testutil.EndToEnd(t)
	args := []string{"--source", "example", "--no-lease", "--ngpus", "0", "--nproc-per-node", "2", "--python", pythonPath(), "x.py"}
	p := dryRun(t, cleanEnv(t, "PYTHONPATH="+filepath.Join(writeFakeTorch(t), "lib")), args...)
	if e := p.Ranks[1].Env; e["TORCH_FR_BUFFER_SIZE"] != "2000" || e["TORCH_NCCL_DUMP_ON_TIMEOUT"] != "1" || e["TORCH_NCCL_TRACE_BUFFER_SIZE"] != "" {
		t.Errorf("torch 2.11: rank 1's env %v, want TORCH_FR_BUFFER_SIZE=2000 and TORCH_NCCL_DUMP_ON_TIMEOUT=1", e)
	}
	for k := range dryRun(t, cleanEnv(t), args...).Ranks[0].Env {
		if strings.Contains(k, "_FR_") || strings.Contains(k, "TRACE_BUFFER") || strings.Contains(k, "DUMP_ON_TIMEOUT") {
			t.Errorf("a torch without the recorder got %s", k)
		}
	}
}
