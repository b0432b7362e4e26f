package main_test

// CPU leases (issue 23): the exclusive and core-complex CPU sets of two
// amdrun jobs on one node never overlap.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/testutil"
)

// holdRank is a rank that makes OUT/pid-NAME, then waits
// until OUT/go exists (the test has read what it needs from /proc).
const holdRank = `import os, sys, time
out, name = sys.argv[1], sys.argv[2]
open(os.path.join(out, "pid-" + name + ".tmp"), "w").close()
os.rename(os.path.join(out, "pid-" + name + ".tmp"), os.path.join(out, "pid-" + name))
while not os.path.exists(os.path.join(out, "go")):
    time.sleep(0.02)
`

// holdSetup makes a directory out holding holdRank as script, and a
// fresh lease directory in env; py runs the script.
func holdSetup(t *testing.T) (out, script string, env []string, py string) {
	t.Helper()
	out = t.TempDir()
	script = filepath.Join(out, "hold.py")
	if err := os.WriteFile(script, []byte(holdRank), 0o644); err != nil {
		t.Fatal(err)
	}
	return out, script, leaseEnv(t, filepath.Join(t.TempDir(), "leases")), pythonPath()
}

// pidOf finds the one process whose command line is argv.
func pidOf(t *testing.T, argv []string) int {
	t.Helper()
	want := strings.Join(argv, "\x00") + "\x00"
	var found []int
	m, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range m {
		if b, err := os.ReadFile(f); err == nil && string(b) == want {
			var pid int
			fmt.Sscan(filepath.Base(filepath.Dir(f)), &pid)
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		t.Fatalf("processes running %q: %v, want one", argv, found)
	}
	return found[0]
}

// cpusAllowed reads Cpus_allowed_list from /proc/PID/status.
func cpusAllowed(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no Cpus_allowed_list in /proc/%d/status", pid)
	return ""
}

// waitRank waits for OUT/pid-NAME (the rank has started) or for the
// job to end first (done closed), and returns the rank's pid as this
// test sees it: the process running argv (the pid in the file is the
// one in the job's PID namespace when amdrun runs as root).
func waitRank(t *testing.T, out, name string, argv []string, done <-chan struct{}) int {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(out, "pid-"+name)); err == nil {
			return pidOf(t, argv)
		}
		select {
		case <-done:
			t.Fatalf("job %s ended before its rank wrote its pid", name)
		case <-deadline:
			t.Fatalf("job %s: no rank after 60 s", name)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestExclusiveJobsNeverShareCPU: two concurrent jobs with
// --numa-binding exclusive, one rank each, share a lease directory. The
// first runs on CPU 0 only (amdrun started through its own bind shim,
// so that it may use CPU 0 alone, as under taskset: this VM has two
// CPUs), so its exclusive rank gets CPU 0 and leases it; the second may
// use both and must get CPU 1. Without the CPU lease it would get 0-1,
// the node's CPUs, and the test fails. Each rank's Cpus_allowed_list is
// read from /proc/PID/status while both run; a third job then finds no
// free CPU and binds to the node with one warning; amdrun ps shows the
// leases.
func TestExclusiveJobsNeverShareCPU(t *testing.T) {
	testutil.EndToEnd(t)
	own := launch.OwnCPUs()
	if len(own) < 2 || own[0] != 0 || own[1] != 1 {
		t.Skipf("needs CPUs 0 and 1, has %v", own)
	}
	nodes, _ := filepath.Glob("/sys/devices/system/node/node*/cpulist")
	if len(nodes) != 1 {
		t.Skipf("needs one NUMA node holding CPUs 0 and 1, has %d", len(nodes))
	}
	out, script, env, py := holdSetup(t)
	job := func(name string) []string {
		return []string{"--ngpus", "0", "--nproc-per-node", "1", "--numa-binding", "exclusive", "--no-python", py, script, out, name}
	}
	type ended struct {
		r   result
		err error
	}
	var wg sync.WaitGroup
	start := func(name string, args []string) (<-chan struct{}, *ended) {
		done, e := make(chan struct{}), &ended{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done)
			e.r, e.err = runJob(env, args...)
		}()
		return done, e
	}
	defer func() {
		os.WriteFile(filepath.Join(out, "go"), nil, 0o644)
		wg.Wait()
	}()
	// Job a: amdrun itself on CPU 0 (its bind shim execs it so).
	doneA, a := start("a", append([]string{launch.ShimArg, "--cpus", "0", "--", amdrunBin}, job("a")...))
	pidA := waitRank(t, out, "a", []string{py, script, out, "a"}, doneA)
	doneB, b := start("b", job("b"))
	pidB := waitRank(t, out, "b", []string{py, script, out, "b"}, doneB)
	cpuA, cpuB := cpusAllowed(t, pidA), cpusAllowed(t, pidB)
	if cpuA != "0" || cpuB != "1" {
		os.WriteFile(filepath.Join(out, "go"), nil, 0o644)
		wg.Wait()
		t.Fatalf("rank CPUs: job a %s, job b %s; want 0 and 1 (disjoint)\n%s\n%s", cpuA, cpuB, a.r.stderr, b.r.stderr)
	}

	// A third job: nothing left; it binds to the node, saying so once.
	c := runAmdrun(t, env, "--dry-run", "--ngpus", "0", "--nproc-per-node", "1", "--numa-binding", "exclusive", "--no-python", py, script, out, "c")
	if n := strings.Count(c.stderr, "other amdrun jobs lease CPUs of NUMA node 0"); c.code != 0 || n != 1 {
		t.Errorf("third job: exit %d, %d fallback lines, want 0 and 1:\n%s", c.code, n, c.stderr)
	}
	ps := runAmdrun(t, env, "ps")
	for _, want := range []string{"\n0\tleased\tpid ", "\n1\tleased\tpid "} {
		if !strings.Contains(ps.stdout, "CPUS\tSTATE\tDETAIL"+want[:0]) || !strings.Contains(ps.stdout, want) {
			t.Errorf("amdrun ps lacks %q:\n%s%s", want, ps.stdout, ps.stderr)
		}
	}

	if err := os.WriteFile(filepath.Join(out, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for name, e := range map[string]*ended{"a": a, "b": b} {
		if e.err != nil || e.r.code != 0 {
			t.Errorf("job %s: exit %d, %v\n%s", name, e.r.code, e.err, e.r.stderr)
		}
		if strings.Contains(e.r.stderr, "other amdrun jobs lease") {
			t.Errorf("job %s fell back:\n%s", name, e.r.stderr)
		}
	}
	// Both jobs gone: their CPUs are free again.
	ps = runAmdrun(t, env, "ps")
	if strings.Contains(ps.stdout, "leased") {
		t.Errorf("CPU leases outlive their jobs:\n%s", ps.stdout)
	}
}
