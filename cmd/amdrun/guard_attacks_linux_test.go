package main_test

// Issue 26, class 3: a job tries to shed its guards, as a throwaway user
// would on a shared node (root-only: CI runs them as root).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amdrun/amdrun/internal/testutil"
)

// shedScript is the rank of TestAttackShedGuard: it takes a shared flock
// on DIR/alive.lock (inherited by its child: DIR/alive.lock can be locked
// exclusively only once both are gone), clears its parent-death signal
// (prctl PR_SET_PDEATHSIG 0), leaves a child in a session of its own that
// clears it too, writes DIR/pids, waits for DIR/go and SIGKILLs its
// guard (its parent); then it sleeps, to be killed.
const shedScript = `import ctypes, fcntl, os, signal, sys, time
d = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
lock = open(os.path.join(d, "alive.lock"), "a")
fcntl.flock(lock, fcntl.LOCK_SH)
PR_SET_PDEATHSIG = 1
if libc.prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0) != 0:
    sys.exit("prctl failed")
child = os.fork()
if child == 0:
    os.setsid()
    libc.prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0)
    time.sleep(1000)
    os._exit(0)
with open(os.path.join(d, "pids.tmp"), "w") as f:
    f.write("%d %d\n" % (os.getpid(), child))
os.rename(os.path.join(d, "pids.tmp"), os.path.join(d, "pids"))
while not os.path.exists(os.path.join(d, "go")):
    time.sleep(0.01)
guard = os.getppid()
os.kill(guard, signal.SIGKILL)
print("killed guard", guard, flush=True)
time.sleep(1000)
`

// TestAttackShedGuard: user V's rank clears its parent-death signal,
// leaves a child and SIGKILLs its guard while V's second job waits
// (--wait) for the same device. In each containment this node gives an
// unprivileged user (auto: a user namespace per rank where the kernel
// permits, and the guards alone): after amdrun exits no process of the
// job is left; the queued job starts only once none is (it finds
// DIR/alive.lock free); the summary does not say the rank died of
// SIGKILL. Before issue 26's change the lease dropped while the rank and
// its child ran (3 of 3 tries) and the summary said "signal SIGKILL".
func TestAttackShedGuard(t *testing.T) {
	s := newShared(t)
	v := testutil.NewUser(t)
	for _, mode := range []string{"auto", "subreaper"} {
		t.Run(mode, func(t *testing.T) {
			dir := testutil.SharedDir(t, 0o1777)
			script, check := filepath.Join(dir, "shed.py"), filepath.Join(dir, "check.py")
			os.WriteFile(script, []byte(shedScript), 0o644)
			os.WriteFile(check, []byte(queuedScript), 0o644)
			leases := filepath.Join(testutil.SharedDir(t, 0o755), "amdrun")
			s.rootPrepared(leases)
			env, mark := newMark(t, s.envFor(leases))
			a := s.job(&v, env, "--contain", mode, "--devices", "0", "--no-python", "/usr/bin/python3", script, dir)
			aErr := a.stderr
			t.Cleanup(func() { killMarked(mark) })
			if !waitFor(60*time.Second, func() bool { _, err := os.Stat(filepath.Join(dir, "pids")); return err == nil }) {
				t.Fatalf("the rank did not start; stderr:\n%s", aErr)
			}
			pids, _ := os.ReadFile(filepath.Join(dir, "pids"))
			bEnv := setEnv(env, envMark, mark+"-queued")
			b := s.job(&v, bEnv, "--wait=60s", "--devices", "0", "--no-python", "/usr/bin/python3", check, dir)
			bErr := b.stderr
			t.Cleanup(func() { killMarked(mark + "-queued") })
			if !waitFor(20*time.Second, func() bool { return strings.Contains(bErr.String(), "amdrun: waiting for") }) {
				t.Fatalf("the second job did not queue; stderr:\n%s", bErr)
			}
			os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
			select {
			case <-a.done:
			case <-time.After(60 * time.Second):
				t.Fatalf("the shedding job did not end; stderr:\n%s", aErr)
			}
			left := marked(mark)
			if len(left) > 0 {
				t.Errorf("%d process(es) of the job outlived amdrun: %s (rank and child were %s)", len(left), describe(left), strings.TrimSpace(string(pids)))
			}
			select {
			case <-b.done:
				if b.err != nil {
					t.Fatalf("the queued job: %v; stderr:\n%s", b.err, bErr)
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("the queued job did not run; stderr:\n%s", bErr)
			}
			if _, err := os.Stat(filepath.Join(dir, "violation")); err == nil {
				t.Errorf("the queued job started while processes of the shedding job still ran")
			}
			if _, err := os.Stat(filepath.Join(dir, "ran0")); err != nil {
				t.Errorf("the queued job's rank did not run; stderr:\n%s", bErr)
			}
			summary := aErr.String()
			if a.cmd.ProcessState.ExitCode() == 0 || !strings.Contains(summary, "1 of 1 ranks failed") {
				t.Errorf("amdrun exited %d; stderr:\n%s", a.cmd.ProcessState.ExitCode(), summary)
			}
			if !strings.Contains(summary, "its guard (pid ") || !strings.Contains(summary, "the rank and all it started") {
				t.Errorf("the summary does not say the guard ended and what was done about the rank:\n%s", summary)
			}
			if want := map[bool]string{true: "the keeper killed", false: "amdrun killed"}[mode == "auto" && userNamespaces(t, v)]; !strings.Contains(summary, want) {
				t.Errorf("the summary does not say %q:\n%s", want, summary)
			}
			if strings.Contains(summary, "signal SIGKILL") {
				t.Errorf("the summary says the rank died of SIGKILL while it lived:\n%s", summary)
			}
			t.Logf("%s: %s", mode, strings.TrimSpace(summary))
		})
	}
}

// bgJob is an amdrun started in the background.
type bgJob struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuf
	done           chan struct{} // closed once it exited; err is its Wait's
	err            error
}

// job starts amdrun as u with env and args in the background; it is
// killed at the end of the test.
func (s *shared) job(u *testutil.User, env []string, args ...string) *bgJob {
	s.t.Helper()
	j := &bgJob{cmd: asUser(u, append([]string{"--topology", s.topo}, args...)...), stdout: newSyncBuf(), stderr: newSyncBuf(), done: make(chan struct{})}
	j.cmd.Env, j.cmd.Stdout, j.cmd.Stderr = env, j.stdout, j.stderr
	if err := j.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	go func() { j.err = j.cmd.Wait(); close(j.done) }()
	s.t.Cleanup(func() { j.cmd.Process.Kill(); <-j.done })
	return j
}

// userNamespaces says whether u may make a user namespace here (what
// amdrun's auto containment then uses), by util-linux's unshare.
func userNamespaces(t *testing.T, u testutil.User) bool {
	t.Helper()
	err := u.Command("unshare", "--user", "--pid", "--mount", "--fork", "--map-current-user", "--mount-proc", "true").Run()
	return err == nil
}

// hangScript is the rank of TestAttackGuardPtraceAndStop: it leaves a
// child in a session of its own, runs DIR/ptrace.py on its guard (its
// parent) into DIR/inside, writes DIR/ready and sleeps.
const hangScript = `import os, subprocess, sys, time
d = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    time.sleep(1000)
    os._exit(0)
out = subprocess.run([sys.executable, os.path.join(d, "ptrace.py"), str(os.getppid())], capture_output=True, text=True)
with open(os.path.join(d, "inside"), "w") as f:
    f.write(out.stdout + out.stderr)
open(os.path.join(d, "ready"), "w").close()
time.sleep(1000)
`

// ptraceScript tries PTRACE_ATTACH on the pid it is given and prints
// "attach PID: 0" or "attach PID: errno N"; when it attached, it detaches.
const ptraceScript = `import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
PTRACE_ATTACH, PTRACE_DETACH = 16, 17
pid = int(sys.argv[1])
if libc.ptrace(PTRACE_ATTACH, pid, None, None) == 0:
    import os
    os.waitpid(pid, 0x40000000)  # __WALL
    libc.ptrace(PTRACE_DETACH, pid, None, None)
    print("attach %d: 0" % pid)
else:
    print("attach %d: errno %d" % (pid, ctypes.get_errno()))
`

// stopScript SIGSTOPs the pids it is given every 50 µs until killed.
const stopScript = `import os, signal, sys, time
pids = [int(p) for p in sys.argv[1:]]
print("stopping", flush=True)
while True:
    for p in pids:
        try:
            os.kill(p, signal.SIGSTOP)
        except OSError:
            pass
    time.sleep(0.00005)
`

// TestAttackGuardPtraceAndStop: the job's own rank tries to
// PTRACE_ATTACH its guard (refused in every mode: the guard is not
// dumpable, and in a user namespace the rank has no capability there);
// with the guards alone, so does another process of user V outside the
// job (refused; attaching the rank itself works, which shows the attempt
// is a real one). In a user namespace per rank the namespace is V's, and
// the kernel gives its owner every capability in it: a process of V
// outside the job can ptrace the guard (the limit docs/supervision.md
// states). Then another process of V SIGSTOPs the guard every 50 µs
// while amdrun is SIGKILLed: under auto containment nothing of the job
// outlives amdrun by more than cleanWithin (issue 26: 6-15 processes
// lived on for 20 s and more). With the guards alone the stop part is
// the documented limit of that mode and is not played here
// (internal/launch's TestStoppedGuardsDoNotKeepTheJob plays it).
func TestAttackGuardPtraceAndStop(t *testing.T) {
	s := newShared(t)
	v := testutil.NewUser(t)
	for _, mode := range []string{"auto", "subreaper"} {
		t.Run(mode, func(t *testing.T) {
			dir := testutil.SharedDir(t, 0o1777)
			for name, body := range map[string]string{"hang.py": hangScript, "ptrace.py": ptraceScript, "stop.py": stopScript} {
				os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
			}
			leases := filepath.Join(testutil.SharedDir(t, 0o755), "amdrun")
			s.rootPrepared(leases)
			env, mark := newMark(t, s.envFor(leases))
			j := s.job(&v, env, "--contain", mode, "--devices", "0", "--no-python", "/usr/bin/python3", filepath.Join(dir, "hang.py"), dir)
			t.Cleanup(func() { killMarked(mark) })
			if !waitFor(60*time.Second, func() bool { _, err := os.Stat(filepath.Join(dir, "ready")); return err == nil }) {
				t.Fatalf("the rank did not start; stderr:\n%s", j.stderr)
			}
			// The guard first: amdrun's own command line names hang.py too.
			var guard, rank int
			for _, pid := range marked(mark) {
				if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(cmdline), "__amdrun_bind") {
					guard = pid
				}
			}
			for _, pid := range marked(mark) {
				if ppid, _ := parentPID(pid); ppid == guard && guard != 0 {
					rank = pid
				}
			}
			if guard == 0 || rank == 0 {
				t.Fatalf("guard %d, rank %d among %s", guard, rank, describe(marked(mark)))
			}
			ptrace := func(pid int) string {
				out, err := v.Command("/usr/bin/python3", filepath.Join(dir, "ptrace.py"), strconv.Itoa(pid)).CombinedOutput()
				if err != nil {
					t.Fatalf("ptrace.py: %v\n%s", err, out)
				}
				return strings.TrimSpace(string(out))
			}
			inside, _ := os.ReadFile(filepath.Join(dir, "inside"))
			if got := strings.TrimSpace(string(inside)); !strings.HasPrefix(got, "attach ") || !strings.HasSuffix(got, fmt.Sprintf(": errno %d", unix.EPERM)) {
				t.Errorf("PTRACE_ATTACH of the guard by its own rank: %q, want EPERM (%d)", got, unix.EPERM)
			}
			if got, want := ptrace(rank), fmt.Sprintf("attach %d: 0", rank); got != want {
				t.Errorf("PTRACE_ATTACH of the rank by its user: %q, want %q (the attempt is not a real one)", got, want)
			}
			if mode == "subreaper" {
				if got, want := ptrace(guard), fmt.Sprintf("attach %d: errno %d", guard, unix.EPERM); got != want {
					t.Errorf("PTRACE_ATTACH of the guard by its user: %q, want %q", got, want)
				}
				// Issue 36.4: amdrun itself, the lease's holder, neither.
				if amdrun := j.cmd.Process.Pid; ptrace(amdrun) != fmt.Sprintf("attach %d: errno %d", amdrun, unix.EPERM) {
					t.Errorf("PTRACE_ATTACH of amdrun by its user: %q, want EPERM", ptrace(amdrun))
				}
				return
			}
			stop := v.Command("/usr/bin/python3", filepath.Join(dir, "stop.py"), strconv.Itoa(guard))
			stopOut := newSyncBuf()
			stop.Stdout = stopOut
			if err := stop.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { stop.Process.Kill(); stop.Wait() }()
			if !waitFor(20*time.Second, func() bool { return strings.Contains(stopOut.String(), "stopping") }) {
				t.Fatal("stop.py did not start")
			}
			before := testutil.Snapshot(marked(mark))
			killed := time.Now()
			j.cmd.Process.Signal(unix.SIGKILL)
			<-j.done
			var left []int
			if !waitFor(cleanWithin, func() bool { left = testutil.Left(envMark+"="+mark, before); return len(left) == 0 }) {
				t.Fatalf("%d process(es) of the job outlived the SIGKILLed amdrun by %v with its guard kept stopped: %s", len(left), cleanWithin, describe(left))
			}
			t.Logf("clean %v after amdrun's SIGKILL, the guard stopped every 50 µs", time.Since(killed).Round(time.Millisecond))
		})
	}
}

// parentPID reads pid's parent from /proc/PID/stat.
func parentPID(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	return strconv.Atoi(f[1])
}

// TestAttackErrorDirLinks (issue 26, class 5): in a TMPDIR root may use
// (root's, sticky), user A plants 64 links named like amdrun's error
// file directory (amdrun-errors-*) into a directory of A's holding a
// forged error file. Root's failing rank records its own exception: it
// lands in a directory of amdrun's own (random name, 0700), nothing is
// written into A's directory, the summary shows the rank's text and never
// A's, and no amdrun-errors-* directory of root's is left. Then runs
// whose amdrun is SIGKILLed (root's: the keeper cleans up; V's, a user
// namespace per rank or the guards alone) leave none behind once the
// next run of the same user has started.
func TestAttackErrorDirLinks(t *testing.T) {
	s := newShared(t)
	a, v := testutil.NewUser(t), testutil.NewUser(t)
	tmp := testutil.SharedDir(t, 0o1777)
	trap := filepath.Join(testutil.SharedDir(t, 0o1777), "a-trap")
	if err := sh(a, "mkdir", "-m", "0777", trap); err != nil {
		t.Fatal(err)
	}
	forged := `{"message": "ForgedError: A wrote this"}`
	for i := 0; i < 64; i++ {
		name := fmt.Sprintf("%s%016x", "amdrun-errors-", i)
		if err := sh(a, "ln", "-s", trap, filepath.Join(tmp, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := sh(a, "sh", "-c", `printf '%s' "$1" > "$2"`, "sh", forged, filepath.Join(trap, "attempt_0.rank_0.json")); err != nil {
		t.Fatal(err)
	}
	leases := filepath.Join(testutil.SharedDir(t, 0o755), "leases")
	env := setEnv(s.envFor(leases), "TMPDIR", tmp)
	r, _ := s.run(nil, env, 30*time.Second, "--ngpus", "0", "--nproc-per-node", "1", "--no-python", "/bin/sh", "-c",
		`echo "ef=$TORCHELASTIC_ERROR_FILE"; ls -ld "$(dirname "$TORCHELASTIC_ERROR_FILE")"; echo '{"message": "RootError: the rank wrote this"}' > "$TORCHELASTIC_ERROR_FILE"; exit 1`)
	if r.code != 1 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "drwx------ ") {
		t.Errorf("the error file directory is not 0700:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "RootError: the rank wrote this") || strings.Contains(r.stderr, "ForgedError") {
		t.Errorf("the summary does not show the rank's own exception, or shows A's:\n%s", r.stderr)
	}
	if ents, _ := os.ReadDir(trap); len(ents) != 1 {
		t.Errorf("root's job wrote into A's directory: %d entries", len(ents))
	}
	errorDirs := func(uid int) []string {
		var out []string
		ents, _ := os.ReadDir(tmp)
		for _, e := range ents {
			fi, err := os.Lstat(filepath.Join(tmp, e.Name()))
			if err == nil && fi.IsDir() && strings.HasPrefix(e.Name(), "amdrun-errors-") && int(fi.Sys().(*syscall.Stat_t).Uid) == uid {
				out = append(out, e.Name())
			}
		}
		return out
	}
	if left := errorDirs(0); len(left) > 0 {
		t.Errorf("root's run left %v", left)
	}

	// Sabotaged runs: amdrun SIGKILLed while its rank runs.
	for _, c := range []struct {
		name string
		u    *testutil.User
		mode string
	}{{"root", nil, "auto"}, {"user-auto", &v, "auto"}, {"user-subreaper", &v, "subreaper"}} {
		t.Run(c.name, func(t *testing.T) {
			dir := testutil.SharedDir(t, 0o1777)
			env, mark := newMark(t, env)
			j := s.job(c.u, env, "--contain", c.mode, "--ngpus", "0", "--nproc-per-node", "2", "--no-python", "/bin/sh", "-c", `touch "$0/ready$RANK"; exec sleep 1000`, dir)
			t.Cleanup(func() { killMarked(mark) })
			if !waitFor(30*time.Second, func() bool { m, _ := filepath.Glob(filepath.Join(dir, "ready*")); return len(m) == 2 }) {
				t.Fatalf("the ranks did not start; stderr:\n%s", j.stderr)
			}
			j.cmd.Process.Signal(syscall.SIGKILL)
			<-j.done
			if !waitFor(cleanWithin, func() bool { return len(marked(mark)) == 0 }) {
				t.Fatalf("the job outlived amdrun: %s", describe(marked(mark)))
			}
			uid := 0
			if c.u != nil {
				uid = c.u.UID
			}
			// The next run of the same user.
			r, _ := s.run(c.u, env, 30*time.Second, "--ngpus", "0", "--nproc-per-node", "1", "--no-python", "/bin/true")
			if r.code != 0 {
				t.Fatalf("the next run: exit %d\n%s", r.code, r.stderr)
			}
			if left := errorDirs(uid); len(left) > 0 {
				t.Errorf("left after a SIGKILLed run and the next one: %v", left)
			}
		})
	}
	if ents, _ := os.ReadDir(trap); len(ents) != 1 {
		t.Errorf("a job wrote into A's directory: %d entries", len(ents))
	}
}
