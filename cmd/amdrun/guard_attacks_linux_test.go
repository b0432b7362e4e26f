package main_test

// Issue 26, class 3: a job tries to shed its guards, as a throwaway user
// would on a shared node (root-only: CI runs them as root).

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/testutil"
)

// shedScript is the rank of TestAttackShedGuard: it takes a shared flock
// on DIR/alive.lock (inherited by its child: DIR/alive.lock can be locked
// exclusively only once both are gone), clears its parent-death signal
// (prctl PR_SET_PDEATHSIG 0), leaves a child in a session of its own that
// clears it too, writes DIR/pids, waits for DIR/go and SIGKILLs its
// guard (its parent). Where the guard is its namespace's init, the
// kernel drops that: the rank says so and exits 3; elsewhere it sleeps.
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
if guard == 1:
    print("the guard is this namespace's init", flush=True)
    sys.exit(3)
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
			if mode == "auto" && userNamespaces(t, v) && !strings.Contains(a.stdout.String(), "the guard is this namespace's init") {
				t.Errorf("in a user namespace the rank could signal its guard; stdout:\n%s", a.stdout)
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
