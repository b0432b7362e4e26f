package main_test

// End-to-end tests of device leases: many real amdrun processes sharing
// one lease directory, as jobs of several users share a node.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/amdrun/amdrun/internal/testutil"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordScript runs as each rank: it sleeps and then writes
// OUT/job<ID>-rank<RANK>.json with its CUDA_VISIBLE_DEVICES and when it
// started and ended. One line on purpose: see
// TestLeaseErrorWithMultiLineCommand.
const recordScript = `import json, os, sys, time; t0 = time.time(); time.sleep(float(sys.argv[3])); ` +
	`json.dump({"job": int(sys.argv[2]), "rank": int(os.environ["RANK"]), "cvd": os.environ["CUDA_VISIBLE_DEVICES"], "start": t0, "end": time.time()}, ` +
	`open(os.path.join(sys.argv[1], "job%s-rank%s.json" % (sys.argv[2], os.environ["RANK"])), "w"))`

// savedTopology writes `amdrun topo --json --source example` (the seed's
// 8-device MI250 node, device keys gpu0..gpu7) to a file.
func savedTopology(t *testing.T) string {
	t.Helper()
	r := runAmdrun(t, cleanEnv(t), "topo", "--json", "--source", "example")
	if r.code != 0 {
		t.Fatalf("amdrun topo --json --source example: exit %d\n%s", r.code, r.stderr)
	}
	path := filepath.Join(t.TempDir(), "node.json")
	if err := os.WriteFile(path, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// leaseEnv is the environment of jobs sharing the lease directory dir,
// made (0755, this user's: no degraded-mode warning) when missing.
func leaseEnv(t *testing.T, dir string) []string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return setEnv(setEnv(cleanEnv(t), "AMDRUN_LEASE_DIR", dir), "OMP_NUM_THREADS", "1")
}

// runJob runs amdrun from any goroutine (runAmdrun may only be called
// from the test's own).
// jobRecord is one job as its ranks recorded it.
type jobRecord struct {
	devices    []string
	start, end float64
}

// readRecords gathers the ranks' files in out into one record per job.
func readRecords(t *testing.T, out string) map[int]*jobRecord {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(out, "job*-rank*.json"))
	jobs := map[int]*jobRecord{}
	for _, f := range files {
		var rec struct {
			Job, Rank  int
			CVD        string
			Start, End float64
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		devs := strings.Split(rec.CVD, ",")
		j, ok := jobs[rec.Job]
		if !ok {
			jobs[rec.Job] = &jobRecord{devices: devs, start: rec.Start, end: rec.End}
			continue
		}
		if !slices.Equal(j.devices, devs) {
			t.Errorf("job %d: ranks saw CUDA_VISIBLE_DEVICES %v and %v", rec.Job, j.devices, devs)
		}
		j.start, j.end = min(j.start, rec.Start), max(j.end, rec.End)
	}
	return jobs
}

// checkNoSharing fails when two jobs ran on one device at overlapping
// times, and returns the most jobs that ran at once.
func checkNoSharing(t *testing.T, jobs map[int]*jobRecord) int {
	t.Helper()
	ids := make([]int, 0, len(jobs))
	for id := range jobs {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for x, a := range ids {
		for _, b := range ids[x+1:] {
			ja, jb := jobs[a], jobs[b]
			overlap := ja.start < jb.end && jb.start < ja.end
			for _, d := range ja.devices {
				if overlap && slices.Contains(jb.devices, d) {
					t.Errorf("jobs %d and %d both ran on device %s at the same time (%.3f-%.3f and %.3f-%.3f)",
						a, b, d, ja.start, ja.end, jb.start, jb.end)
				}
			}
		}
	}
	type ev struct {
		at    float64
		delta int
	}
	var evs []ev
	for _, j := range jobs {
		evs = append(evs, ev{j.start, 1}, ev{j.end, -1})
	}
	sort.Slice(evs, func(i, k int) bool {
		if evs[i].at != evs[k].at {
			return evs[i].at < evs[k].at
		}
		return evs[i].delta < evs[k].delta // an end before a start at the same instant
	})
	most, now := 0, 0
	for _, e := range evs {
		now += e.delta
		most = max(most, now)
	}
	return most
}

// runConcurrentJobs starts jobs amdruns at once, each wanting 2 of the 8
// devices for the recorded sleep, and returns their results.
func runConcurrentJobs(t *testing.T, env []string, topo, out string, jobs int, sleep string, extra ...string) []result {
	t.Helper()
	results := make([]result, jobs)
	errs := make([]error, jobs)
	var wg sync.WaitGroup
	for i := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := append([]string{"--topology", topo, "--ngpus", "2"}, extra...)
			args = append(args, "--no-python", pythonPath(), "-c", recordScript, out, fmt.Sprint(i), sleep)
			results[i], errs[i] = runJob(env, args...)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
	}
	return results
}

func TestConcurrentJobsNeverShareDevice(t *testing.T) {
	testutil.EndToEnd(t)
	topo := savedTopology(t)
	env := leaseEnv(t, filepath.Join(t.TempDir(), "leases")) // one directory for all 16

	t.Run("no-wait", func(t *testing.T) {
		out := t.TempDir()
		results := runConcurrentJobs(t, env, topo, out, 16, "1.5")
		jobs := readRecords(t, out)
		ran := 0
		for i, r := range results {
			if r.code == 0 {
				ran++
				if _, ok := jobs[i]; !ok {
					t.Errorf("job %d exited 0 but its ranks recorded nothing\n%s", i, r.stderr)
				}
				continue
			}
			if _, ok := jobs[i]; ok {
				t.Errorf("job %d ran but exited %d", i, r.code)
			}
			if r.code != 1 {
				t.Errorf("job %d: exit %d, want 1 (no free devices)\n%s", i, r.code, r.stderr)
				continue
			}
			if strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("job %d: want one stderr line, got:\n%s", i, r.stderr)
				continue
			}
			line := strings.TrimSpace(r.stderr)
			if !strings.HasPrefix(line, "amdrun: ") || !strings.Contains(line, "held: ") || !strings.Contains(line, "leased by") {
				t.Errorf("job %d: error %q should list the leased devices and their holders", i, line)
			}
		}
		most := checkNoSharing(t, jobs)
		t.Logf("%d of 16 jobs ran, at most %d at once", ran, most)
		if ran < 1 || most < 1 || most > 4 {
			t.Errorf("%d jobs ran, at most %d at once; want at least 1 and at most 4 (8 devices / 2)", ran, most)
		}
	})

	t.Run("wait", func(t *testing.T) {
		out := t.TempDir()
		results := runConcurrentJobs(t, env, topo, out, 16, "1.5", "--wait")
		for i, r := range results {
			if r.code != 0 {
				t.Errorf("job %d with --wait: exit %d\n%s", i, r.code, r.stderr)
			}
		}
		jobs := readRecords(t, out)
		if len(jobs) != 16 {
			t.Errorf("%d jobs recorded a run, want all 16", len(jobs))
		}
		most := checkNoSharing(t, jobs)
		t.Logf("at most %d jobs at once", most)
		if most > 4 {
			t.Errorf("%d jobs ran at once on 8 devices, 2 each", most)
		}
	})
}

func TestKilledLeaseHolderFreesDevices(t *testing.T) {
	testutil.EndToEnd(t)
	topo := savedTopology(t)
	env := leaseEnv(t, filepath.Join(t.TempDir(), "leases"))
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid0")
	holder := exec.Command(amdrunBin, "--topology", topo, "--ngpus", "8", "--no-python", pythonPath(), "-c",
		`import os, sys, time; tmp = sys.argv[1] + os.environ["RANK"] + ".tmp"; open(tmp, "w").write(str(os.getpid())); os.rename(tmp, sys.argv[1]); time.sleep(60)`, pidFile)
	holderEnv, mark := newMark(t, env)
	holder.Env = holderEnv
	var holderErr bytes.Buffer
	holder.Stderr = &holderErr
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait(); killMarked(mark) })
	worker := 0
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, err := os.ReadFile(pidFile); err == nil {
			fmt.Sscan(string(b), &worker)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the holder's worker did not start\n%s", holderErr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	st := devState(t, runAmdrun(t, env, "--topology", topo, "ps"))
	for d := range 8 {
		if st[d] != "leased" {
			t.Fatalf("while the holder runs, ps says device %d is %q, want leased (states %v)", d, st[d], st)
		}
	}
	if r := runAmdrun(t, env, "--topology", topo, "--ngpus", "8", "--dry-run", "x.py"); r.code != 1 {
		t.Fatalf("--ngpus 8 --dry-run while all 8 are leased: exit %d, want 1", r.code)
	}

	holder.Process.Kill() // SIGKILL: amdrun cannot release anything itself
	holder.Wait()

	// The devices stay leased until the last process of the job is gone
	// (a few milliseconds), and not a moment longer: nothing to clean up.
	var r result
	freed := waitFor(2*time.Second, func() bool {
		r = runAmdrun(t, env, "--topology", topo, "--ngpus", "8", "--dry-run", "--json", "x.py")
		var p dryPlan
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &p) == nil && slices.Equal(p.Devices, []int{0, 1, 2, 3, 4, 5, 6, 7})
	})
	if !freed {
		t.Errorf("2 s after the holder was killed, --ngpus 8 does not get all 8: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if left := marked(mark); len(left) > 0 {
		t.Errorf("the devices were free while the holder's worker lived: %s", describe(left))
	}
	st = devState(t, runAmdrun(t, env, "--topology", topo, "ps"))
	for d, s := range st {
		if s == "leased" {
			t.Errorf("after the holder was killed, ps still lists device %d leased", d)
		}
	}
	if len(st) != 8 {
		t.Errorf("ps listed %d devices, want 8", len(st))
	}
}

// TestSymlinkAtLeasePathRefused: a symlink at one device's lease path is
// never followed; that device alone is left out, with one warning naming
// the path.
func TestSymlinkAtLeasePathRefused(t *testing.T) {
	testutil.EndToEnd(t)
	topo := savedTopology(t)
	dir := filepath.Join(t.TempDir(), "leases")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "precious.txt")
	const content = "not a lease file\n"
	if err := os.WriteFile(target, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	// The example's devices have no PCI address nor unique id: key "gpu0",
	// lease file "gpu0.lock" (lease.FileName).
	planted := filepath.Join(dir, "gpu0.lock")
	if err := os.Symlink(target, planted); err != nil {
		t.Fatal(err)
	}
	env := leaseEnv(t, dir)
	for _, args := range [][]string{
		{"--topology", topo, "--ngpus", "8", "--no-python", pythonPath(), "-c", "print('ran')"},
		{"--topology", topo, "--ngpus", "8", "--dry-run", "x.py"},
	} {
		r := runAmdrun(t, env, args...)
		if r.code != 1 || strings.Contains(r.stdout, "ran") {
			t.Errorf("amdrun %v with a symlink at %s: exit %d, want 1 without running\n%s%s", args, planted, r.code, r.stdout, r.stderr)
			continue
		}
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "amdrun: warning: lease: "+planted+": unsafe path: a symlink owned by ") ||
			!strings.HasSuffix(lines[1], "held: 0 (unusable lease file))") {
			t.Errorf("want the warning naming %s and the one-line error, got:\n%s", planted, r.stderr)
		}
	}
	// The other seven are leased as usual.
	if p := dryRun(t, env, "--topology", topo, "--ngpus", "7", "x.py"); !slices.Equal(p.Devices, []int{1, 2, 3, 4, 5, 6, 7}) {
		t.Errorf("--ngpus 7 chose %v, want 1-7", p.Devices)
	}
	if r := runAmdrun(t, env, "--topology", topo, "--ngpus", "7", "--no-python", "/bin/true"); r.code != 0 {
		t.Errorf("--ngpus 7: exit %d\n%s", r.code, r.stderr)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != content {
		t.Errorf("symlink target now holds %q (%v); want it untouched", b, err)
	}
	if fi, err := os.Lstat(planted); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the planted symlink was replaced or removed (%v)", err)
	}
}

// TestLeaseErrorWithMultiLineCommand: a job started with a multi-line
// `python3 -c` program holds devices; another job that finds them leased
// must still say, on its one line, every device that is held.
func TestLeaseErrorWithMultiLineCommand(t *testing.T) {
	testutil.EndToEnd(t)
	topo := savedTopology(t)
	env := leaseEnv(t, filepath.Join(t.TempDir(), "leases"))
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid0")
	holder := exec.Command(amdrunBin, "--topology", topo, "--ngpus", "8", "--no-python", pythonPath(), "-c",
		"import os, sys, time\nopen(sys.argv[1], 'w').write(str(os.getpid()))\ntime.sleep(60)\n", pidFile)
	holderEnv, mark := newMark(t, env)
	holder.Env = holderEnv
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait(); killMarked(mark) })
	waitPids(t, dir, 1)

	r := runAmdrun(t, env, "--topology", topo, "--ngpus", "2", "--no-python", pythonPath(), "-c", "pass")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	line := strings.TrimSpace(r.stderr)
	if strings.Contains(line, "\n") {
		t.Errorf("want one stderr line, got:\n%s", r.stderr)
	}
	// Devices that share a holder are grouped: "held: 0-7 (leased by ...)".
	if !strings.Contains(line, "held: 0-7 (leased by") || !strings.HasSuffix(line, ")") {
		t.Errorf("the error does not list devices 0-7 as leased on one complete line (a newline in the holder's command cuts it short):\n%s", r.stderr)
	}
}
