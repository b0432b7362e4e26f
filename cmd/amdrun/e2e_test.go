package main_test

// End-to-end tests: the real amdrun binary, built once, run as a user
// would run it, on fixture topologies. Vendor tools are replayed by
// testdata/fake/fake-tool linked first on PATH.

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/amdrun/amdrun/internal/testutil"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var amdrunBin string

// roles are what this test binary stands in for when re-executed (the
// attacks' helpers, a node of the two-node tests): each _linux test file
// adds its own, and TestMain dispatches them through testutil.Dispatch
// before it builds amdrun.
var roles []testutil.Role

func TestMain(m *testing.M) {
	testutil.Dispatch(roles...)
	flag.Parse()
	if testing.Short() {
		// Every test here runs the built binary: the short tier skips
		// them all (testutil.EndToEnd), so there is nothing to build.
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "amdrun-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Other users run it too (attacks_linux_test.go).
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	amdrunBin = filepath.Join(dir, "amdrun")
	build := exec.Command("go", "build", "-o", amdrunBin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

// cleanEnv is the test process's environment without variables that
// change amdrun's choice, plus a private lease directory.
func cleanEnv(t *testing.T, extra ...string) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "AMDRUN_LEASE_DIR",
			"AMDRUN_SYSFS_ROOT", "SLURM_JOB_ID", "OMP_NUM_THREADS", "VIRTUAL_ENV", "CONDA_PREFIX":
			continue
		}
		env = append(env, kv)
	}
	// A lease directory of this user's that nobody else can change: no
	// degraded-mode warning (the tests of shared directories make theirs).
	leases := filepath.Join(t.TempDir(), "leases")
	if err := os.Mkdir(leases, 0o755); err != nil {
		t.Fatal(err)
	}
	env = append(env, "AMDRUN_LEASE_DIR="+leases)
	return append(env, extra...)
}

// runAmdrun runs amdrun with env and args and fails the test when it
// cannot be run or prints a Go stack trace. Call it from the test's own
// goroutine; other goroutines use runJob.
func runAmdrun(t *testing.T, env []string, args ...string) result {
	t.Helper()
	r, err := runJob(env, args...)
	if err != nil {
		t.Fatalf("amdrun %v: %v", args, err)
	}
	return r
}

// runJob runs amdrun with env and args ("__netns", NAME, args... runs it
// inside that network namespace). The error is one of running it at all,
// or a Go stack trace in its stderr; an exit status is in result.code.
func runJob(env []string, args ...string) (result, error) {
	cmd := exec.Command(amdrunBin, args...)
	if len(args) > 1 && args[0] == "__netns" {
		cmd = exec.Command("ip", append([]string{"netns", "exec", args[1], amdrunBin}, args[2:]...)...)
	}
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code, err = ee.ExitCode(), nil
	}
	if err == nil && (strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic:")) {
		err = fmt.Errorf("printed a Go stack trace:\n%s", r.stderr)
	}
	return r, err
}

// dryPlan is the part of `--dry-run --json` the tests read.
type dryPlan struct {
	Devices        []int  `json:"devices"`
	VisibleDevices string `json:"visible_devices"`
	Policy         string `json:"policy"`
	Ranks          []struct {
		Rank      int               `json:"rank"`
		LocalRank int               `json:"local_rank"`
		Device    int               `json:"device"`
		NUMANode  int               `json:"numa_node"`
		CPUs      []int             `json:"cpus"`
		Argv      []string          `json:"argv"`
		Env       map[string]string `json:"env"`
	} `json:"ranks"`
}

func dryRun(t *testing.T, env []string, args ...string) dryPlan {
	t.Helper()
	return planOf(t, runAmdrun(t, env, append([]string{"--dry-run", "--json"}, args...)...), args)
}

// planOf reads the plan that `amdrun --dry-run --json args` printed.
func planOf(t *testing.T, r result, args []string) dryPlan {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("amdrun --dry-run --json %v: exit %d\n%s", args, r.code, r.stderr)
	}
	var p dryPlan
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil {
		t.Fatalf("dry-run JSON: %v\n%s", err, r.stdout)
	}
	return p
}

func TestSeedRecommendationsOnBundledExample(t *testing.T) {
	testutil.EndToEnd(t)
	env := cleanEnv(t)
	for _, tc := range []struct {
		n    int
		want string
	}{{1, "0"}, {2, "0,1"}, {3, "0,1,6"}, {4, "0,1,6,7"}, {8, "0,1,2,3,4,5,6,7"}} {
		p := dryRun(t, env, "--source", "example", "--ngpus", fmt.Sprint(tc.n), "train.py", "--lr", "3e-4")
		if p.VisibleDevices != tc.want {
			t.Errorf("N=%d: visible devices %q, want %q (the seed's recommendation)", tc.n, p.VisibleDevices, tc.want)
		}
		if len(p.Ranks) != tc.n {
			t.Fatalf("N=%d: %d ranks", tc.n, len(p.Ranks))
		}
		last := p.Ranks[tc.n-1]
		if got := strings.Join(last.Argv[len(last.Argv)-3:], " "); got != "train.py --lr 3e-4" {
			t.Errorf("N=%d: rank argv ends %q, want the script and its flags as given", tc.n, got)
		}
	}
}

func TestRingPolicyPrefersDirectRing(t *testing.T) {
	testutil.EndToEnd(t)
	p := dryRun(t, cleanEnv(t), "--source", "example", "--ngpus", "4", "--policy", "ring", "x.py")
	if p.VisibleDevices != "0,1,2,3" {
		t.Fatalf("ring N=4 chose %q, want 0,1,2,3 (ring 0-1-3-2 on direct links)", p.VisibleDevices)
	}
	r := runAmdrun(t, cleanEnv(t), "--source", "example", "--ngpus", "4", "--policy", "ring", "--dry-run", "--explain", "x.py")
	if r.code != 0 || !strings.Contains(r.stdout, "ring:") || !strings.Contains(r.stdout, "naive") {
		t.Fatalf("--explain should show the ring and the naive pick; exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestBadInputOneLineNonZero(t *testing.T) {
	testutil.EndToEnd(t)
	env := cleanEnv(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown policy", []string{"--source", "example", "--policy", "fastest", "--dry-run", "x.py"}, 2, "fastest"},
		{"gpus that do not split over the ranks", []string{"--source", "example", "--ngpus", "3", "--nproc-per-node", "2", "--dry-run", "x.py"}, 2, "--ngpus 3"},
		{"grace without a unit", []string{"--source", "example", "--grace", "5", "--dry-run", "x.py"}, 2, "add a unit"},
		{"torchrun option amdrun cannot honour", []string{"--source", "example", "--signals-to-handle", "SIGKILL", "--dry-run", "x.py"}, 2, "--signals-to-handle: SIGKILL cannot be forwarded"},
		{"ambiguous abbreviation", []string{"--source", "example", "--rdzv", "c10d", "--dry-run", "x.py"}, 2, "ambiguous option: --rdzv could match"},
		{"negative gpus", []string{"--source", "example", "--ngpus", "-3", "--dry-run", "x.py"}, 2, "--ngpus"},
		{"too many gpus", []string{"--source", "example", "--ngpus", "9", "--dry-run", "x.py"}, 1, "8"},
		{"malformed devices", []string{"--source", "example", "--devices", "0,x", "--dry-run", "x.py"}, 2, "--devices"},
		{"empty devices", []string{"--source", "example", "--devices", "", "--dry-run", "x.py"}, 2, "--devices"},
		{"unknown device", []string{"--source", "example", "--devices", "12", "--dry-run", "x.py"}, 2, "12"},
		{"unknown source", []string{"--source", "magic", "topo"}, 2, "magic"},
		{"unknown flag", []string{"--frobnicate", "x.py"}, 2, "frobnicate"},
		{"missing script", []string{"--source", "example", "--ngpus", "2"}, 2, "SCRIPT"},
		{"bad bind", []string{"--source", "example", "--bind", "ccd", "--dry-run", "x.py"}, 2, "ccd"},
		{"missing topology file", []string{"--topology", "/nonexistent/node.json", "topo"}, 1, "/nonexistent/node.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runAmdrun(t, env, tc.args...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\nstderr: %s", r.code, tc.code, r.stderr)
			}
			first := strings.SplitN(strings.TrimSpace(r.stderr), "\n", 2)[0]
			if !strings.HasPrefix(first, "amdrun: ") || !strings.Contains(first, tc.want) {
				t.Fatalf("first stderr line %q should start with amdrun: and mention %q", first, tc.want)
			}
		})
	}
}

func TestNoWorkerOutlivesKilledAmdrun(t *testing.T) {
	testutil.EndToEnd(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "w.py")
	os.WriteFile(script, []byte(`import os, sys, time
open(os.path.join(sys.argv[1], "pid%s" % os.environ["RANK"]), "w").write(str(os.getpid()))
time.sleep(60)
`), 0o644)
	cmd := exec.Command(amdrunBin, "--source", "example", "--ngpus", "2", "--python", pythonPath(), script, dir)
	env, mark := newMark(t, cleanEnv(t))
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer killMarked(mark)
	waitPids(t, dir, 2)
	cmd.Process.Kill() // SIGKILL: amdrun cannot clean up itself
	cmd.Wait()
	// The pids the workers wrote are their own, maybe in a PID namespace
	// of the job's: they are found by their mark instead.
	var left []int
	if !waitFor(5*time.Second, func() bool { left = marked(mark); return len(left) == 0 }) {
		t.Fatalf("still alive after amdrun was SIGKILLed: %s", describe(left))
	}
}

func TestSIGTERMReachesEveryRank(t *testing.T) {
	testutil.EndToEnd(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "w.py")
	os.WriteFile(script, []byte(`import os, signal, sys, time
d = sys.argv[1]
def on_term(sig, frame):
    open(os.path.join(d, "term%s" % os.environ["RANK"]), "w").write("ok")
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
open(os.path.join(d, "pid%s" % os.environ["RANK"]), "w").write(str(os.getpid()))
time.sleep(60)
`), 0o644)
	cmd := exec.Command(amdrunBin, "--source", "example", "--ngpus", "3", "--python", pythonPath(), script, dir)
	cmd.Env = cleanEnv(t)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitPids(t, dir, 3)
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Fatal("amdrun did not exit after SIGTERM")
	}
	for r := 0; r < 3; r++ {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("term%d", r))); err != nil {
			t.Errorf("rank %d's SIGTERM handler did not run", r)
		}
	}
}

func TestFailingRankExitCode(t *testing.T) {
	testutil.EndToEnd(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "w.py")
	os.WriteFile(script, []byte(`import os, sys, time
if os.environ["RANK"] == "1":
    time.sleep(0.3)
    print("rank 1 gives up", file=sys.stderr)
    sys.exit(3)
open(os.path.join(sys.argv[1], "pid%s" % os.environ["RANK"]), "w").write(str(os.getpid()))
time.sleep(60)
`), 0o644)
	start := time.Now()
	env, mark := newMark(t, cleanEnv(t))
	defer killMarked(mark)
	r := runAmdrun(t, env, "--source", "example", "--ngpus", "3", "--grace", "2s", "--python", pythonPath(), script, dir)
	if r.code != 3 {
		t.Fatalf("exit %d, want the failing rank's 3\n%s", r.code, r.stderr)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("took %s: the others should be stopped within the grace period", el)
	}
	if !strings.Contains(r.stderr, "rank 1 gives up") || !strings.Contains(r.stderr, "root cause") {
		t.Fatalf("failure summary should show rank 1's stderr and mark the root cause:\n%s", r.stderr)
	}
	if left := marked(mark); len(left) > 0 {
		t.Errorf("still alive after amdrun exited: %s", describe(left))
	}
}

// runLogs is the one run directory of runID in the log directory base:
// torchrun's <run id>_XXXXXXXX.
func runLogs(t *testing.T, base, runID string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(base, runID+"_????????"))
	if len(m) != 1 {
		t.Fatalf("run directories of %s in %s: %v, want one", runID, base, m)
	}
	return m[0]
}

func pythonPath() string {
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return "python3"
}

func readPids(dir string) []int {
	var pids []int
	m, _ := filepath.Glob(filepath.Join(dir, "pid*"))
	for _, f := range m {
		b, _ := os.ReadFile(f)
		var pid int
		if _, err := fmt.Sscan(string(b), &pid); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func waitPids(t *testing.T, dir string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if p := readPids(dir); len(p) == n {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("workers did not start: %v", readPids(dir))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
