package main_test

// Regression tests for bugs found by using amdrun as a user would. Each
// fails until its bug is fixed.

import (
	"encoding/json"
	"github.com/amdrun/amdrun/internal/testutil"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writeTopology saves the bundled example topology, changed by edit, and
// returns the file's path.
func writeTopology(t *testing.T, edit func(m map[string]any)) string {
	t.Helper()
	r := runAmdrun(t, cleanEnv(t), "topo", "--json", "--source", "example")
	if r.code != 0 {
		t.Fatalf("topo --json: exit %d\n%s", r.code, r.stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "node.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// --grace 0 must SIGKILL the other ranks at once, not wait the default 10s.
func TestReviewGraceZeroKillsAtOnce(t *testing.T) {
	testutil.EndToEnd(t)
	start := time.Now()
	r := runAmdrun(t, cleanEnv(t, "OMP_NUM_THREADS=1"), "--source", "example", "-n", "2", "--grace", "0",
		"--no-python", "sh", "-c", `trap "" TERM; if [ "$RANK" = 0 ]; then sleep 0.3; exit 5; fi; sleep 30`)
	if r.code != 5 {
		t.Fatalf("exit %d, want 5\n%s", r.code, r.stderr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("--grace 0 took %s: the rank ignoring SIGTERM was killed after the 10s default, not at once", d.Round(time.Second))
	}
}

// A vendor tool whose child keeps its stdout open (a wrapper script over
// a hung driver call) must not hang amdrun past the tool timeout.
func TestReviewHungToolWithChildTimesOut(t *testing.T) {
	testutil.EndToEnd(t)
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "rocm-smi"), []byte("#!/bin/sh\nsleep 1000\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := toolEnv(t, bin+string(os.PathListSeparator)+systemPath(), "AMDRUN_TOOL_TIMEOUT=2s")
	cmd := exec.Command(amdrunBin, "--source", "rocm-smi", "topo")
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// whatever happens, leave no amdrun or fake tool behind
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("exit 0 from a hung rocm-smi\n%s", stderr.String())
		}
		if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "timed out after 2s") {
			t.Errorf("want one \"amdrun: ... timed out\" line (no retry), got:\n%s", stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("amdrun --source rocm-smi topo still running after 20s with a hung rocm-smi (AMDRUN_TOOL_TIMEOUT=2s): " +
			"RunTool waits for the pipes the tool's child holds open (no cmd.WaitDelay / process-group kill)")
	}
}

// Two devices with the same runtime index in a --topology file must be
// refused: otherwise two ranks get the same physical GPU.
func TestReviewDuplicateRuntimeIndexRefused(t *testing.T) {
	testutil.EndToEnd(t)
	p := writeTopology(t, func(m map[string]any) {
		m["devices"].([]any)[2].(map[string]any)["runtime_index"] = 1
	})
	r := runAmdrun(t, cleanEnv(t), "--topology", p, "--devices", "1,2", "-n", "2", "--dry-run", "x.py")
	if r.code == 0 {
		t.Fatalf("accepted a topology where devices 1 and 2 share runtime index 1; plan:\n%s", r.stdout)
	}
	oneErrorLine(t, r)
}

// A negative link bandwidth in a --topology file must be refused.
func TestReviewNegativeBandwidthRefused(t *testing.T) {
	testutil.EndToEnd(t)
	p := writeTopology(t, func(m map[string]any) {
		m["links"].([]any)[0].(map[string]any)["max_bandwidth_mb_s"] = -100
	})
	r := runAmdrun(t, cleanEnv(t), "--topology", p, "-n", "2", "--dry-run", "x.py")
	if r.code == 0 {
		t.Fatalf("accepted a link of -100 MB/s; plan:\n%s", r.stdout)
	}
	oneErrorLine(t, r)
}

// doctor must not say OK for visible-device variables that make every run
// fail (CUDA_VISIBLE_DEVICES indexes into what ROCR_VISIBLE_DEVICES leaves).
func TestReviewDoctorFlagsCudaRocrConflict(t *testing.T) {
	testutil.EndToEnd(t)
	env := cleanEnv(t, "CUDA_VISIBLE_DEVICES=0,1", "ROCR_VISIBLE_DEVICES=2")
	run := runAmdrun(t, env, "--source", "example", "-n", "1", "--dry-run", "x.py")
	if run.code == 0 {
		t.Fatalf("run accepted CUDA 0,1 within ROCR 2:\n%s", run.stdout)
	}
	r := runAmdrun(t, env, "doctor", "--source", "example", "--python", "/nonexistent/python")
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.Contains(line, "visible devices") && strings.HasPrefix(line, "[OK") {
			t.Errorf("doctor says %q but a run fails with: %s", line, strings.TrimSpace(run.stderr))
		}
	}
}

// --help must not promise that --ngpus 0 means every free device when
// --ngpus 0 is a usage error.
func TestReviewNgpusZeroHelpMatchesBehaviour(t *testing.T) {
	testutil.EndToEnd(t)
	r := runAmdrun(t, cleanEnv(t), "--source", "example", "--ngpus", "0", "--dry-run", "x.py")
	h := runAmdrun(t, cleanEnv(t), "--help")
	if r.code != 0 && strings.Contains(h.stdout, "0 = every free device") {
		t.Errorf("--help says \"0 = every free device\" but --ngpus 0 exits %d: %s", r.code, strings.TrimSpace(r.stderr))
	}
}

// The --topology flag's help must name its value FILE, not "amdrun topo --json"
// (pflag takes the first `quoted` word of the usage as the value name).
func TestReviewTopologyFlagHelp(t *testing.T) {
	testutil.EndToEnd(t)
	h := runAmdrun(t, cleanEnv(t), "--help")
	if strings.Contains(h.stdout, "--topology amdrun topo --json") {
		t.Error("help shows the value of --topology as \"amdrun topo --json\" (backquotes in the flag's usage); want FILE")
	}
}

// Usage errors exit 2: an unknown completion shell, and --source file
// without --topology, and --topology together with another --source.
func TestReviewMoreUsageErrorsExit2(t *testing.T) {
	testutil.EndToEnd(t)
	for _, args := range [][]string{
		{"completion", "tcsh"},
		{"--source", "file", "topo"},
		{"--source", "sysfs", "--topology", "/dev/null", "topo"},
	} {
		r := runAmdrun(t, cleanEnv(t), args...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "amdrun: ") {
			t.Errorf("amdrun %s: exit %d, want 2 with an \"amdrun: \" line; stderr %q", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}

// --local-ranks-filter with --launcher torchrun must not silently hide all
// of torchrun's output (torchrun is the only process amdrun starts).
func TestReviewTorchrunLocalRanksFilterKeepsOutput(t *testing.T) {
	testutil.EndToEnd(t)
	bin := t.TempDir()
	fake := "#!/bin/sh\necho torchrun-ran\n"
	if err := os.WriteFile(filepath.Join(bin, "torchrun"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	env := setEnv(cleanEnv(t, "OMP_NUM_THREADS=1"), "PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	script := filepath.Join(bin, "t.py") // there: amdrun refuses a missing script (issue 31)
	if err := os.WriteFile(script, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := runAmdrun(t, env, "--source", "example", "--launcher", "torchrun", "-n", "2", "--local-ranks-filter", "1", script)
	if r.code == 0 && !strings.Contains(r.stdout, "torchrun-ran") {
		t.Errorf("exit 0 and torchrun's output vanished (--local-ranks-filter 1 filtered torchrun as rank 0); want it passed to torchrun or refused")
	}
}
