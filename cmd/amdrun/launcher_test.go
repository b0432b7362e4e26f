package main_test

import (
	"encoding/json"
	"github.com/amdrun/amdrun/internal/testutil"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLauncherTorchrun checks --launcher torchrun: amdrun chooses the
// devices, then runs torchrun (a fake one first on PATH that records what
// it got) with them visible, --nproc-per-node N and the rendezvous flags
// passed through, and exits with torchrun's exit code.
func TestLauncherTorchrun(t *testing.T) {
	testutil.EndToEnd(t)
	bin := t.TempDir()
	out := filepath.Join(t.TempDir(), "torchrun.json")
	fake := "#!" + pythonPath() + `
import json, os, sys
json.dump({"argv": sys.argv[1:], "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
           "hip": os.environ.get("HIP_VISIBLE_DEVICES"), "rank": os.environ.get("RANK")},
          open(os.environ["FAKE_TORCHRUN_OUT"], "w"))
sys.exit(7)
`
	if err := os.WriteFile(filepath.Join(bin, "torchrun"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	env := cleanEnv(t, "FAKE_TORCHRUN_OUT="+out)
	for i, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			env[i] = "PATH=" + bin + ":" + kv[len("PATH="):]
		}
	}
	// The script must be there: amdrun refuses a missing one (issue 31).
	script := filepath.Join(bin, "train.py")
	if err := os.WriteFile(script, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := runAmdrun(t, env, "--source", "example", "--launcher", "torchrun", "--ngpus", "4",
		"--nnodes", "1:2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "node0:29400", "--rdzv-id", "job7",
		"--max-restarts", "2", script, "--lr", "3e-4")
	if r.code != 7 {
		t.Fatalf("exit %d, want torchrun's 7\n%s", r.code, r.stderr)
	}
	var got struct {
		Argv      []string
		Cuda, Hip string
		Rank      *string
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("torchrun was not run: %v\n%s", err, r.stderr)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("fake torchrun's record %q: %v", b, err)
	}
	want := "--nproc_per_node 4 --nnodes 1:2 --rdzv_backend c10d --rdzv_endpoint node0:29400 --rdzv_id job7 --max_restarts 2 " + script + " --lr 3e-4"
	if strings.Join(got.Argv, " ") != want {
		t.Errorf("torchrun argv\n got %q\nwant %q", strings.Join(got.Argv, " "), want)
	}
	if got.Cuda != "0,1,6,7" || got.Hip != "0,1,6,7" {
		t.Errorf("visible devices %q/%q, want amdrun's choice 0,1,6,7", got.Cuda, got.Hip)
	}
	if got.Rank != nil {
		t.Errorf("RANK=%q leaked into torchrun's environment: torchrun sets it per worker", *got.Rank)
	}
}
