package main_test

// Issue 36: what a rank holds of its supervisor, played as root and as a
// throwaway user (shr...) in each containment this node permits
// (root-only: CI runs them as root).

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amdrun/amdrun/internal/testutil"
)

// containCase is one way a job is contained: as whom (nil: root) and in
// which mode.
type containCase struct {
	name string
	user *testutil.User
	mode string
}

// containCases are root in a PID namespace, and a throwaway user in a
// user namespace (where the kernel lets the user make one) and under the
// guards alone.
func containCases(t *testing.T) []containCase {
	u := testutil.NewUserPrefixed(t, "shr")
	cases := []containCase{{"root-pid-namespace", nil, "pid-namespace"}}
	if userNamespaces(t, u) {
		cases = append(cases, containCase{"user-user-namespace", &u, "user-namespace"})
	} else {
		t.Logf("%s may not make a user namespace here: user-namespace mode not played", u.Name)
	}
	return append(cases, containCase{"user-subreaper", &u, "subreaper"})
}

// rankLines are the lines of a job's output with their "[rankN]: "
// prefixes taken off.
func rankLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if i := strings.Index(l, "]: "); strings.HasPrefix(l, "[rank") && i > 0 {
			l = l[i+3:]
		}
		lines = append(lines, l)
	}
	return lines
}

// TestAttackRankInherits: every rank of a 2-rank job lists its own open
// descriptors and its capability sets. In each mode it holds 0, 1 and 2
// only, and as a user no capability in any set; the guards-only mode
// says in one line what a job can still do there. Before issue 36 a rank
// in user-namespace mode held gpu0.lock, gpu1.lock and two pipes of the
// keeper's (with them it could release its job's lease, or end amdrun
// with a forged status), and CAP_SYS_ADMIN in the job's namespace.
func TestAttackRankInherits(t *testing.T) {
	s := newShared(t)
	for _, c := range containCases(t) {
		t.Run(c.name, func(t *testing.T) {
			leases := filepath.Join(testutil.SharedDir(t, 0o755), "amdrun")
			s.rootPrepared(leases)
			r, _ := s.run(c.user, s.envFor(leases), 60*time.Second, "--contain", c.mode, "-n", "2", "--devices", "0,1",
				"--no-python", "/bin/sh", "-c", `ls /proc/$$/fd; grep '^Cap' /proc/self/status`)
			if r.code != 0 {
				t.Fatalf("amdrun exited %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			fds := map[string]int{}
			for _, l := range rankLines(r.stdout) {
				if k, v, ok := strings.Cut(l, ":"); ok && strings.HasPrefix(k, "Cap") {
					if k != "CapBnd" && c.user != nil && strings.Trim(v, " \t0") != "" {
						t.Errorf("a rank of %s holds a capability: %s", c.name, l)
					}
					continue
				}
				fds[l]++
			}
			for fd, n := range fds {
				if fd != "0" && fd != "1" && fd != "2" {
					t.Errorf("%d rank(s) hold descriptor %s besides 0, 1 and 2:\n%s", n, fd, r.stdout)
				}
			}
			if fds["0"] != 2 || fds["2"] != 2 {
				t.Errorf("not both ranks listed their descriptors:\n%s", r.stdout)
			}
			if warned := strings.Contains(r.stderr, "amdrun: warning: only the guards contain this job"); warned != (c.mode == "subreaper") {
				t.Errorf("the guards-only warning is %v in %s mode:\n%s", warned, c.mode, r.stderr)
			}
		})
	}
}

// signalScript sends the keeper (pid 1 of the job's namespace) every
// signal that ends a Go program by default, by kill(2) and, for the
// fault signals, by sigqueue(3) (si_code SI_QUEUE, which Go's runtime
// takes for a fault of its own), then says whether the keeper lives.
const signalScript = `import ctypes, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
for s in ("SEGV", "ABRT", "SYS", "BUS", "FPE", "ILL", "TRAP", "QUIT", "TERM", "INT", "HUP", "USR1", "USR2", "ALRM", "PIPE", "XCPU"):
    os.kill(1, getattr(signal, "SIG" + s))
for s in ("SEGV", "ILL", "BUS", "FPE", "SYS", "ABRT"):
    libc.sigqueue(1, getattr(signal, "SIG" + s), ctypes.c_void_p(0))
time.sleep(0.5)
os.kill(1, 0)
print("keeper alive")
`

// TestAttackKillKeeper: a rank sends its keeper every signal that ends
// a Go program (kill -SEGV 1 ended it before issue 36, and the job with
// it, the summary blaming the guards); the keeper lives and the job ends
// well. Then root SIGKILLs the keeper of a running job: the summary says
// the keeper died, not that the guards did.
func TestAttackKillKeeper(t *testing.T) {
	s := newShared(t)
	dir := testutil.SharedDir(t, 0o755)
	script := filepath.Join(dir, "keepersig.py")
	if err := os.WriteFile(script, []byte(signalScript), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range containCases(t) {
		if c.mode == "subreaper" {
			continue // no keeper
		}
		t.Run(c.name, func(t *testing.T) {
			leases := filepath.Join(testutil.SharedDir(t, 0o755), "amdrun")
			s.rootPrepared(leases)
			r, _ := s.run(c.user, s.envFor(leases), 60*time.Second, "--contain", c.mode, "--devices", "0", "--no-python", "/usr/bin/python3", script)
			if r.code != 0 || !strings.Contains(r.stdout, "keeper alive") {
				t.Errorf("the rank's signals ended the keeper: amdrun exited %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			env, mark := newMark(t, s.envFor(leases))
			t.Cleanup(func() { killMarked(mark) })
			j := s.job(c.user, env, "--contain", c.mode, "--devices", "0", "--no-python", "/bin/sleep", "60")
			keeper := 0
			if !waitFor(20*time.Second, func() bool { keeper = keeperOf(j.cmd.Process.Pid); return keeper > 0 && sleeping(mark) }) {
				t.Fatalf("no keeper and rank came up; stderr:\n%s", j.stderr)
			}
			syscall.Kill(keeper, syscall.SIGKILL)
			select {
			case <-j.done:
			case <-time.After(30 * time.Second):
				t.Fatalf("amdrun did not end after its keeper was killed; stderr:\n%s", j.stderr)
			}
			if want := "the job's keeper (pid " + strconv.Itoa(keeper) + ") was killed by SIGKILL"; !strings.Contains(j.stderr.String(), want) {
				t.Errorf("the summary does not say %q:\n%s", want, j.stderr)
			}
		})
	}
}

// keeperOf finds the keeper among amdrun's children: 0 when it has none.
func keeperOf(amdrun int) int {
	kids, _ := filepath.Glob("/proc/" + strconv.Itoa(amdrun) + "/task/*/children")
	var b []byte
	for _, k := range kids {
		c, _ := os.ReadFile(k)
		b = append(append(b, c...), ' ')
	}
	for _, f := range strings.Fields(string(b)) {
		cmdline, _ := os.ReadFile("/proc/" + f + "/cmdline")
		if strings.Contains(string(cmdline), "__amdrun_keeper") {
			n, _ := strconv.Atoi(f)
			return n
		}
	}
	return 0
}

// sleeping says whether a process of the job marked mark runs sleep.
func sleeping(mark string) bool {
	for _, p := range marked(mark) {
		if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/comm"); strings.TrimSpace(string(comm)) == "sleep" {
			return true
		}
	}
	return false
}

// TestAttackLogDirLinkInParent: user A plants a link to a directory of
// root's in A's 0777 directory; root's job with --log-dir A's/link/nologin
// is refused in one line and makes nothing in root's directory (before
// issue 36 root made it there: with /etc, /etc/nologin). A link in a
// directory only root can change is still followed.
func TestAttackLogDirLinkInParent(t *testing.T) {
	s := newShared(t)
	a := testutil.NewUserPrefixed(t, "shr")
	private := testutil.SharedDir(t, 0o700)
	trap := filepath.Join(testutil.SharedDir(t, 0o755), "a-0777")
	if err := os.Mkdir(trap, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(trap, 0o777)
	os.Chown(trap, a.UID, a.GID)
	if err := sh(a, "ln", "-s", private, filepath.Join(trap, "link")); err != nil {
		t.Fatal(err)
	}
	r, _ := s.run(nil, s.env, 30*time.Second, "--log-dir", filepath.Join(trap, "link", "nologin"), "--ngpus", "0", "--nproc-per-node", "1", "--no-python", "/bin/true")
	if ents, _ := os.ReadDir(private); len(ents) != 0 {
		t.Errorf("root's job made %s in its private directory through A's link", ents[0].Name())
	}
	if line := oneError(t, r); r.code == 0 || !strings.Contains(line, "not followed") {
		t.Errorf("exit %d, want a refusal naming the link:\n%s", r.code, r.stderr)
	}
	rootLink := filepath.Join(testutil.SharedDir(t, 0o755), "logs")
	if err := os.Symlink(private, rootLink); err != nil {
		t.Fatal(err)
	}
	r, _ = s.run(nil, s.env, 30*time.Second, "--log-dir", filepath.Join(rootLink, "job"), "--ngpus", "0", "--nproc-per-node", "1", "--no-python", "/bin/true")
	if _, err := os.Stat(filepath.Join(private, "job")); r.code != 0 || err != nil {
		t.Errorf("a link of root's in root's directory was not followed: exit %d, %v\n%s", r.code, err, r.stderr)
	}
}

// TestAttackQueuedSignals: a user's job queued behind another holding
// every device gets SIGTERM, SIGINT, SIGHUP or SIGQUIT: it exits 128+n
// with one line and leaves no ticket in queue/ (before issue 36 it died
// as Go's runtime has it, leaving its ticket, and SIGQUIT printed a
// goroutine dump).
func TestAttackQueuedSignals(t *testing.T) {
	s := newShared(t)
	v := testutil.NewUserPrefixed(t, "shr")
	leases := filepath.Join(testutil.SharedDir(t, 0o755), "amdrun")
	s.rootPrepared(leases)
	env, mark := newMark(t, s.envFor(leases))
	t.Cleanup(func() { killMarked(mark) })
	if signal.Ignored(syscall.SIGHUP) {
		// Under nohup the jobs would inherit SIGHUP ignored and keep it so
		// (devicesCatching, as nohup asks): catching it here gives them the
		// default.
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGHUP)
		t.Cleanup(func() { signal.Stop(c) })
	}
	holder := s.job(&v, env, "--ngpus", "8", "--no-python", "/bin/sleep", "120")
	s.waitLeased(leases, 8, holder.cmd, holder.stderr)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT} {
		j := s.job(&v, env, "--ngpus", "1", "--wait=120s", "--no-python", "/bin/true")
		if !waitFor(30*time.Second, func() bool { return strings.Contains(j.stderr.String(), "amdrun: waiting for") }) {
			t.Fatalf("the job did not queue; stderr:\n%s", j.stderr)
		}
		// The line is printed just before lease.Claim writes the ticket.
		n := 0
		if !waitFor(10*time.Second, func() bool { n = len(s.queueOf(leases)); return n == 1 }) {
			t.Errorf("%d tickets while one job waits", n)
		}
		j.cmd.Process.Signal(sig)
		select {
		case <-j.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%v: the queued job did not end", sig)
		}
		lines := strings.Split(strings.TrimSpace(j.stderr.String()), "\n")
		want := "amdrun: " + unix.SignalName(sig) + " while waiting for devices: left the queue"
		if code := j.cmd.ProcessState.ExitCode(); code != 128+int(sig) || len(lines) != 2 || lines[1] != want {
			t.Errorf("%v: exit %d, want %d and the line %q after the queued one:\n%s", sig, code, 128+int(sig), want, j.stderr)
		}
		if left := s.queueOf(leases); len(left) != 0 {
			t.Errorf("%v: the queued job left %d ticket(s): %v", sig, len(left), left)
		}
		ents, _ := os.ReadDir(filepath.Join(leases, "queue"))
		if len(ents) != 0 {
			t.Errorf("%v: queue/ holds %d file(s) after the job left", sig, len(ents))
		}
	}
}

// plantScript is user A's watcher: as soon as a process named amdrun of
// the uid it is given appears, it makes the file that process's ticket
// would have had before issue 36 (<uid>-<pid>-<start>.lock, all public
// in /proc) in the queue, prints its name and exits.
const plantScript = `import os, sys, time
q, uid = sys.argv[1], sys.argv[2]
while True:
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            if open("/proc/%s/comm" % p).read().strip() != "amdrun":
                continue
            if "Uid:\t%s\t" % uid not in open("/proc/%s/status" % p).read():
                continue
            st = open("/proc/%s/stat" % p).read()
        except OSError:
            continue
        start = st[st.rindex(")") + 2:].split()[19]
        name = "%s-%s-%s.lock" % (uid, p, start)
        open(os.path.join(q, name), "w").close()
        print(name, flush=True)
        sys.exit(0)
    time.sleep(0.001)
`

// TestAttackQueuePlaces: queue places another user cannot take.
// predicted-name: user A plants the ticket name V's job would take, as
// soon as V's amdrun appears; V's job still queues in order (before
// issue 36 its ticket could not be made: it waited without order, and a
// later user went first 3 of 8 times). pid-namespace: a --wait job in a
// PID namespace of its own, whose /proc hides the other jobs, is refused
// in one line (before, it took itself for the first in the queue).
func TestAttackQueuePlaces(t *testing.T) {
	s := newShared(t)
	a, v := testutil.NewUserPrefixed(t, "shr"), testutil.NewUserPrefixed(t, "shr")
	leases := filepath.Join(testutil.SharedDir(t, 0o755), "amdrun")
	s.rootPrepared(leases)
	env, mark := newMark(t, s.envFor(leases))
	t.Cleanup(func() { killMarked(mark) })
	holder := s.job(nil, env, "--ngpus", "8", "--no-python", "/bin/sleep", "120")
	s.waitLeased(leases, 8, holder.cmd, holder.stderr)
	t.Run("predicted-name", func(t *testing.T) {
		plant := a.Command("/usr/bin/python3", "-c", plantScript, filepath.Join(leases, "queue"), strconv.Itoa(v.UID))
		planted := newSyncBuf()
		plant.Stdout = planted
		if err := plant.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { plant.Process.Kill(); plant.Wait() })
		time.Sleep(200 * time.Millisecond) // its first look at /proc is done
		j := s.job(&v, env, "--ngpus", "1", "--wait=60s", "--no-python", "/bin/true")
		if !waitFor(30*time.Second, func() bool { return strings.Contains(j.stderr.String(), "amdrun: waiting for") }) {
			t.Fatalf("V's job did not queue; stderr:\n%s", j.stderr)
		}
		if planted.String() == "" {
			t.Skip("A's watcher did not plant a name before V's job queued")
		}
		if strings.Contains(j.stderr.String(), "first-come-first-served") {
			t.Errorf("A's planted %s kept V's job out of the queue:\n%s", strings.TrimSpace(planted.String()), j.stderr)
		}
		found := false
		for _, w := range s.queueOf(leases) {
			found = found || w.PID == j.cmd.Process.Pid
		}
		if !found {
			t.Errorf("ps does not show V's job (pid %d) in the queue", j.cmd.Process.Pid)
		}
		j.cmd.Process.Signal(syscall.SIGTERM)
		<-j.done
	})
	t.Run("pid-namespace", func(t *testing.T) {
		cmd := exec.Command("unshare", "--pid", "--fork", "--mount-proc", amdrunBin, "--topology", s.topo, "--ngpus", "1", "--wait=5s", "--no-python", "/bin/true")
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "PID namespace of its own") || strings.Contains(string(out), "first in the queue") {
			t.Errorf("a --wait job in a PID namespace of its own: %v\n%s", err, out)
		}
	})
}

// TestAttackLeaseInitChmod: lease init over a directory of root's that it
// did not make (0700, holding only a 0600 .lock) changes no mode there
// and says so in one line (before issue 36 it made them 0755 and 0644);
// over one it made, it still repairs a mode.
func TestAttackLeaseInitChmod(t *testing.T) {
	s := newShared(t)
	dir := filepath.Join(testutil.SharedDir(t, 0o755), "amdrun")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o700)
	r, _ := s.run(nil, s.env, 20*time.Second, "lease", "init", "--lease-dir", dir)
	mode := func(p string) os.FileMode { fi, _ := os.Stat(p); return fi.Mode().Perm() }
	if mode(dir) != 0o700 || mode(filepath.Join(dir, ".lock")) != 0o600 {
		t.Errorf("lease init changed modes it did not make: %v, .lock %v", mode(dir), mode(filepath.Join(dir, ".lock")))
	}
	if line := oneError(t, r); r.code == 0 || !strings.Contains(line, "lease init changes nothing there") {
		t.Errorf("exit %d, want a refusal:\n%s", r.code, r.stderr)
	}
	made := filepath.Join(testutil.SharedDir(t, 0o755), "amdrun")
	s.rootPrepared(made)
	os.Chmod(made, 0o700)
	s.rootPrepared(made)
	if mode(made) != 0o755 {
		t.Errorf("lease init did not repair the mode of its own directory: %v", mode(made))
	}
}

// TestAttackTMPDIRUnusable: a TMPDIR the job's user cannot make a
// directory in (root's 0755 directory; a read-only file system) is passed
// over for /tmp, as a missing one is (before issue 36 the job was refused
// with "mkdir ...: permission denied" or "read-only file system").
func TestAttackTMPDIRUnusable(t *testing.T) {
	s := newShared(t)
	v := testutil.NewUserPrefixed(t, "shr")
	rootOnly := testutil.SharedDir(t, 0o755)
	ro := testutil.SharedDir(t, 0o755)
	cases := []struct {
		name string
		user *testutil.User
		tmp  string
	}{{"another-users", &v, rootOnly}}
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "ro,mode=1777", "shr-ro", ro).Run(); err == nil {
		t.Cleanup(func() { exec.Command("umount", ro).Run() })
		cases = append(cases, struct {
			name string
			user *testutil.User
			tmp  string
		}{"read-only", nil, ro})
	} else {
		t.Logf("no read-only tmpfs here (%v): that case not played", err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := setEnv(s.env, "TMPDIR", c.tmp)
			r, _ := s.run(c.user, env, 30*time.Second, "--ngpus", "0", "--nproc-per-node", "1", "--no-python", "/bin/sh", "-c", `echo "$TORCHELASTIC_ERROR_FILE"`)
			if r.code != 0 || !strings.HasPrefix(strings.TrimSpace(r.stdout), "/tmp/") {
				t.Errorf("exit %d, error file %q, want one under /tmp\n%s", r.code, strings.TrimSpace(r.stdout), r.stderr)
			}
		})
	}
}

// TestAttackTinyStack: a user's job under ulimit -s 16, run 12 times:
// amdrun itself may not start (the kernel puts its arguments and
// environment on that stack: SIGSEGV before main, nothing to report),
// but every run that does start refuses in one line naming the limit,
// and none runs or names a guard (before issue 36 a guard or the keeper
// died of SIGSEGV now and then, the summary naming the guard).
func TestAttackTinyStack(t *testing.T) {
	s := newShared(t)
	v := testutil.NewUserPrefixed(t, "shr")
	said := 0
	for range 12 {
		cmd := v.Command("prlimit", "--stack=16384", amdrunBin, "--topology", s.topo, "--ngpus", "0", "--nproc-per-node", "2", "--no-python", "/bin/true")
		cmd.Env = s.env
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == -1 && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGSEGV {
			continue // amdrun itself, before main
		}
		if err == nil || strings.Contains(string(out), "its guard (pid") || !strings.HasPrefix(string(out), "amdrun: the stack limit (ulimit -s 16) is too small") {
			t.Fatalf("under ulimit -s 16: %v\n%s", err, out)
		}
		said++
	}
	if said == 0 {
		t.Skip("amdrun itself never started under ulimit -s 16 here")
	}
}

// TestAttackProcMount: a root rank in its PID namespace leaves a daemon
// and unmounts the job's /proc, or mounts a tmpfs over it, and exits.
// The guards and the keeper read the /proc they opened before the rank
// ran: amdrun ends at once and nothing of the job is left (before issue
// 36 the guards read the node's /proc with the job's pids, never found
// the daemon, and amdrun hung).
func TestAttackProcMount(t *testing.T) {
	s := newShared(t)
	for name, how := range map[string]string{"umount": "umount -l /proc", "tmpfs-over": "mount -t tmpfs shr-proc /proc"} {
		t.Run(name, func(t *testing.T) {
			env, mark := newMark(t, s.env)
			t.Cleanup(func() { killMarked(mark) })
			r, took := s.run(nil, env, 30*time.Second, "--contain", "pid-namespace", "--ngpus", "0", "--nproc-per-node", "1", "--no-python",
				"/bin/sh", "-c", `setsid sleep 300 </dev/null >/dev/null 2>&1 & `+how+` && echo done`)
			if r.code != 0 || !strings.Contains(r.stdout, "done") {
				t.Errorf("exit %d after %v\n%s%s", r.code, took, r.stdout, r.stderr)
			}
			if left := marked(mark); len(left) > 0 {
				t.Errorf("%d process(es) of the job outlived amdrun: %s", len(left), describe(left))
			}
		})
	}
}
