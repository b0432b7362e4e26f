package main_test

// The attacks of issue 14, each played end to end as local users would
// play them on a shared node: root and two throwaway accounts (useradd),
// the real amdrun binary, and util-linux (setpriv, flock) for what the
// attacker runs. Every test needs root (testutil.RequireRoot); CI runs
// them with AMDRUN_REQUIRE_ROOT=1.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amdrun/amdrun/internal/testutil"
)

// helperEnv makes the test binary a helper instead of running tests
// (a role of TestMain's testutil.Dispatch): "exchange" swaps two names in
// a loop, "split" plays the fallback-split attack inside a private mount
// namespace. Its arguments follow the -test.run=^$ that keeps a helper
// from running tests.
const helperEnv = "AMDRUN_E2E_HELPER"

func init() {
	roles = append(roles, testutil.Role{Env: helperEnv, Run: func(mode string, args []string) int {
		return runHelper(mode, args[1:])
	}})
}

func runHelper(mode string, args []string) int {
	switch mode {
	case "exchange":
		// exchange DIR A B: renameat2(RENAME_EXCHANGE) A and B in DIR until
		// killed, as fast as it can.
		fd, err := unix.Open(args[0], unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, "exchange:", err)
			return 2
		}
		fmt.Println("ready")
		for {
			_ = unix.Renameat2(fd, args[1], fd, args[2], unix.RENAME_EXCHANGE)
		}
	case "split":
		return splitHelper()
	}
	fmt.Fprintln(os.Stderr, "unknown helper", mode)
	return 2
}

// shared is a node as several users see it: the amdrun binary and the
// saved topology readable by everyone, and an environment for their jobs.
type shared struct {
	t    *testing.T
	topo string
	env  []string
}

func newShared(t *testing.T) *shared {
	t.Helper()
	testutil.EndToEnd(t)
	testutil.RequireRoot(t)
	pub := testutil.SharedDir(t, 0o755)
	topo := filepath.Join(pub, "node.json")
	b, err := os.ReadFile(savedTopology(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(topo, b, 0o644); err != nil {
		t.Fatal(err)
	}
	env := cleanEnv(t, "OMP_NUM_THREADS=1")
	// Nothing of root's home: another user's amdrun must not warn about
	// a bench cache it cannot read.
	env = setEnv(env, "XDG_CACHE_HOME", filepath.Join(pub, "no-cache"))
	return &shared{t: t, topo: topo, env: env}
}

// envFor is the environment of a job using the lease directory dir.
func (s *shared) envFor(dir string) []string { return setEnv(s.env, "AMDRUN_LEASE_DIR", dir) }

// asUser returns the command that runs amdrun with args as u (nil: root).
func asUser(u *testutil.User, args ...string) *exec.Cmd {
	if u == nil {
		return exec.Command(amdrunBin, args...)
	}
	return u.Command(amdrunBin, args...)
}

// run runs amdrun as u with env and args, killing it after limit: a hang
// is a finding, not a stuck test.
func (s *shared) run(u *testutil.User, env []string, limit time.Duration, args ...string) (result, time.Duration) {
	s.t.Helper()
	cmd := asUser(u, append([]string{"--topology", s.topo}, args...)...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	timer := time.AfterFunc(limit, func() { cmd.Process.Kill() })
	start := time.Now()
	err := cmd.Wait()
	took := time.Since(start)
	timer.Stop()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			s.t.Errorf("amdrun %v hung: killed after %s\n%s", args, limit, r.stderr)
		}
	} else if err != nil {
		s.t.Fatal(err)
	}
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic:") {
		s.t.Errorf("amdrun %v printed a Go stack trace:\n%s", args, r.stderr)
	}
	return r, took
}

// start starts amdrun as u in the background (killed at the end of the
// test) and returns its command.
func (s *shared) start(u *testutil.User, env []string, args ...string) (*exec.Cmd, *syncBuf) {
	s.t.Helper()
	cmd := asUser(u, append([]string{"--topology", s.topo}, args...)...)
	cmd.Env = env
	errb := newSyncBuf()
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, errb
}

// waitLeased waits until ps, run by root, shows n devices leased in dir.
func (s *shared) waitLeased(dir string, n int, job *exec.Cmd, jobErr *syncBuf) {
	s.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, _ := s.run(nil, s.envFor(dir), 20*time.Second, "ps")
		leased := 0
		for _, st := range devState(s.t, r) {
			if st == "leased" {
				leased++
			}
		}
		if leased == n {
			return
		}
		if job.ProcessState != nil || time.Now().After(deadline) {
			s.t.Fatalf("the holding job did not lease %d devices (ps shows %d)\n%s", n, leased, jobErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sh runs a plain program as u and returns its error.
func sh(u testutil.User, name string, args ...string) error {
	out, err := u.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %v: %w: %s", name, args, err, out)
	}
	return nil
}

// oneLine checks that stderr holds exactly one line not a warning, and
// returns it.
func oneError(t *testing.T, r result) string {
	t.Helper()
	var errs []string
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if !strings.HasPrefix(l, "amdrun: warning: ") {
			errs = append(errs, l)
		}
	}
	if len(errs) != 1 || !strings.HasPrefix(errs[0], "amdrun: ") {
		t.Fatalf("want one error line after any warnings, got:\n%s", r.stderr)
	}
	return errs[0]
}

// rootPrepared makes a lease directory with `amdrun lease init`, as root.
func (s *shared) rootPrepared(dir string) {
	s.t.Helper()
	r, _ := s.run(nil, s.env, 20*time.Second, "lease", "init", "--lease-dir", dir)
	if r.code != 0 {
		s.t.Fatalf("amdrun lease init: exit %d\n%s", r.code, r.stderr)
	}
}

// TestAttackSteal: user V's job holds all 8 devices; user A, who ran
// jobs there before, tries to take them. In a root-prepared directory A
// can neither delete, replace nor add a lease file, and A's job is told
// the devices are V's, by the kernel's word. Also when A made the default
// directory first: lease init adopts it (it holds only what jobs make),
// and A owns nothing in it after.
func TestAttackSteal(t *testing.T) {
	s := newShared(t)
	v, a := testutil.NewUser(t), testutil.NewUser(t)
	for _, first := range []bool{false, true} {
		t.Run(map[bool]string{false: "root-prepared", true: "attacker-made-it-first"}[first], func(t *testing.T) {
			base := testutil.SharedDir(t, 0o1777) // like /run/lock
			dir := filepath.Join(base, "amdrun")
			if first {
				if err := sh(a, "mkdir", "-m", "1777", dir); err != nil {
					t.Fatal(err)
				}
				// Without lease init, every job is told what it cannot rely on.
				r, _ := s.run(&v, s.envFor(dir), 30*time.Second, "--ngpus", "1", "--no-python", "/bin/true")
				if r.code != 0 || !strings.Contains(r.stderr, "amdrun: warning: lease directory "+dir+" is not root-prepared (degraded mode") ||
					!strings.Contains(r.stderr, a.Name) {
					t.Fatalf("job in A's directory: exit %d, want the degraded-mode warning naming %s:\n%s", r.code, a.Name, r.stderr)
				}
				// It holds only what jobs make: lease init adopts it, and
				// A owns nothing in it any more (issue 31).
				r, _ = s.run(nil, s.env, 20*time.Second, "lease", "init", "--lease-dir", dir)
				if want := fmt.Sprintf("%s: adopted the directory jobs made in the degraded mode (owner %s (uid %d), mode 1777): now root's, 0755", dir, a.Name, a.UID); r.code != 0 || !strings.Contains(r.stdout, want) {
					t.Errorf("lease init over A's directory: exit %d, want %q:\n%s%s", r.code, want, r.stdout, r.stderr)
				}
				if tree := testutil.Tree(t, dir); strings.Contains(tree, fmt.Sprintf(" uid %d ", a.UID)) {
					t.Errorf("A still owns something in the adopted directory:\n%s", tree)
				}
			}
			s.rootPrepared(dir)
			job, jobErr := s.start(&v, s.envFor(dir), "--ngpus", "8", "--no-python", "/bin/sleep", "60")
			s.waitLeased(dir, 8, job, jobErr)
			if jobErr.Len() != 0 {
				t.Errorf("V's job in the root-prepared directory warned:\n%s", jobErr)
			}
			lock := filepath.Join(dir, "gpu0.lock")
			for _, try := range [][]string{
				{"rm", "-f", lock},
				{"mv", lock, filepath.Join(dir, "x")},
				{"ln", "-s", "/etc/shadow", filepath.Join(dir, "gpu9.lock")},
				{"mkfifo", filepath.Join(dir, "gpu9.lock")},
				{"rm", "-rf", filepath.Join(dir, "queue")},
			} {
				if err := sh(a, try[0], try[1:]...); err == nil {
					t.Errorf("user A could %v in the root-prepared directory", try)
				}
			}
			if fi, err := os.Lstat(lock); err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("%s: %v", lock, err)
			}
			r, _ := s.run(&a, s.envFor(dir), 30*time.Second, "--ngpus", "2", "--no-python", "/bin/true")
			line := oneError(t, r)
			want := fmt.Sprintf("held: 0-7 (leased by pid %d (%s: ", job.Process.Pid, v.Name)
			if r.code != 1 || !strings.Contains(line, want) || strings.Contains(r.stderr, "warning") {
				t.Errorf("A's job: exit %d, want 1 with %q and no warning:\n%s", r.code, want, r.stderr)
			}
			r, _ = s.run(&a, s.envFor(dir), 30*time.Second, "ps")
			for d, st := range devState(t, r) {
				if st != "leased" {
					t.Errorf("A's ps: device %d %s, want leased", d, st)
				}
			}
			if !strings.Contains(r.stdout, fmt.Sprintf("\tleased\tpid %d, user %s, started ", job.Process.Pid, v.Name)) {
				t.Errorf("A's ps does not name V's job:\n%s", r.stdout)
			}
		})
	}
}

// TestAttackLeaseInitStandIns: a mistyped --lease-dir (a stand-in for
// /etc/passwd, a directory of root's unrelated files) is refused in one
// line and left exactly as it was (issue 26: lease init moved
// /etc/passwd aside and put a lease directory in its place).
func TestAttackLeaseInitStandIns(t *testing.T) {
	s := newShared(t)
	base := testutil.SharedDir(t, 0o755)
	passwd := filepath.Join(base, "passwd")
	if err := os.WriteFile(passwd, []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	etc := filepath.Join(base, "etc")
	os.Mkdir(etc, 0o755)
	os.WriteFile(filepath.Join(etc, "hosts"), []byte("127.0.0.1 localhost\n"), 0o644)
	for _, c := range []struct{ path, want string }{
		{passwd, "a regular file owned by root (uid 0), mode 0644, that lease init did not make; lease init changes nothing there"},
		{etc, "a directory owned by root (uid 0), mode 0755, that lease init did not make: it holds files lease init does not make (hosts)"},
	} {
		before := testutil.Tree(t, base)
		r, _ := s.run(nil, s.env, 20*time.Second, "lease", "init", "--lease-dir", c.path)
		if line := oneError(t, r); r.code == 0 || !strings.HasPrefix(line, "amdrun: lease: "+c.path+": unsafe path: "+c.want) {
			t.Errorf("lease init --lease-dir %s: exit %d, want %q:\n%s", c.path, r.code, c.want, r.stderr)
		}
		if after := testutil.Tree(t, base); after != before {
			t.Errorf("lease init --lease-dir %s changed what it did not make:\nbefore\n%s\nafter\n%s", c.path, before, after)
		}
	}
}

// TestAttackPlantedFile: in a directory every user can write (the
// degraded mode), user A plants one thing at device 3's lease path. Only
// device 3 is affected: V's jobs on other devices, ps and --wait work,
// with one warning naming the path and A, and nothing is followed.
func TestAttackPlantedFile(t *testing.T) {
	s := newShared(t)
	v, a := testutil.NewUser(t), testutil.NewUser(t)
	shadow := shadowState(t)
	kinds := []struct {
		name  string
		plant [][]string
		what  string
	}{
		{"symlink-to-etc-shadow", [][]string{{"ln", "-s", "/etc/shadow", "@"}}, "a symlink owned by " + a.Name},
		{"fifo", [][]string{{"mkfifo", "@"}}, "a FIFO owned by " + a.Name},
		{"directory", [][]string{{"mkdir", "@"}}, "a directory owned by " + a.Name},
		{"another-users-0600-file", [][]string{{"touch", "@"}, {"chmod", "600", "@"}}, "cannot be read (mode 0600, owned by " + a.Name},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			dir := filepath.Join(testutil.SharedDir(t, 0o755), "amdrun")
			if err := os.Mkdir(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			syscall.Chmod(dir, 0o1777) // root's, every user's: as /run/lock/amdrun after root's first job
			planted := filepath.Join(dir, "gpu3.lock")
			for _, argv := range k.plant {
				argv = slices.Clone(argv)
				argv[len(argv)-1] = planted
				if err := sh(a, argv[0], argv[1:]...); err != nil {
					t.Fatal(err)
				}
			}
			env := s.envFor(dir)
			r, took := s.run(&v, env, 30*time.Second, "--devices", "0", "--no-python", "/bin/true")
			if r.code != 0 {
				t.Fatalf("--devices 0 with %s at %s: exit %d\n%s", k.name, planted, r.code, r.stderr)
			}
			var faults []string
			for _, l := range strings.Split(r.stderr, "\n") {
				if strings.Contains(l, "gpu3") {
					faults = append(faults, l)
				}
			}
			if len(faults) != 1 || !strings.Contains(faults[0], planted) || !strings.Contains(faults[0], k.what) {
				t.Errorf("want one warning naming %s and %q, got:\n%s", planted, k.what, r.stderr)
			}
			t.Logf("--devices 0 took %v", took)
			p := dryRunAs(t, s, &v, env, "--ngpus", "7")
			if slices.Contains(p.Devices, 3) || len(p.Devices) != 7 {
				t.Errorf("--ngpus 7 chose %v", p.Devices)
			}
			r, _ = s.run(&v, env, 30*time.Second, "ps")
			st := devState(t, r)
			for d := range 8 {
				want := map[bool]string{true: "unusable", false: "free"}[d == 3]
				if st[d] != want {
					t.Errorf("ps: device %d %q, want %q", d, st[d], want)
				}
			}
			r, _ = s.run(&v, env, 30*time.Second, "--wait=20s", "--ngpus", "2", "--no-python", "/bin/true")
			if r.code != 0 {
				t.Errorf("--wait --ngpus 2: exit %d\n%s", r.code, r.stderr)
			}
			if now := shadowState(t); now != shadow {
				t.Error("/etc/shadow changed: its owner, its mode or a line not a throwaway user's")
			}
		})
	}
}

// dryRunAs is dryRun as user u.
func dryRunAs(t *testing.T, s *shared, u *testutil.User, env []string, args ...string) dryPlan {
	t.Helper()
	args = append(slices.Clone(args), "x.py")
	r, _ := s.run(u, env, 30*time.Second, append([]string{"--dry-run", "--json"}, args...)...)
	return planOf(t, r, args)
}

// holdFile has user u hold an exclusive flock on dir/name for two
// minutes (util-linux flock, the attacker's tool, run in dir so that its
// command line starts short), returning once it holds it. extra
// (NAME=VALUE words) lands in flock's own command line, which ps shows;
// env(1) takes them before the program it runs.
func holdFile(t *testing.T, u testutil.User, dir, name string, extra ...string) *exec.Cmd {
	t.Helper()
	argv := append(append([]string{"--exclusive", name, "/usr/bin/env"}, extra...), "/bin/sleep", "120")
	cmd := u.Command("flock", argv...)
	cmd.Dir = dir
	// flock forks the command, which keeps the lock too: one process
	// group to stop them both (userdel refuses a user who runs anything).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	path := filepath.Join(dir, name)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err == nil {
			e := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB)
			unix.Close(fd)
			if e == unix.EWOULDBLOCK {
				return cmd
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("flock on %s not taken", path)
		}
	}
}

// TestAttackNodeLockHold: user A keeps the node lock of a root-prepared
// directory (flock works on a read-only descriptor, so anyone can).
// Every job still ends: --wait=1s after about a second, no --wait within
// a few seconds, each naming A's process.
func TestAttackNodeLockHold(t *testing.T) {
	s := newShared(t)
	v, a := testutil.NewUser(t), testutil.NewUser(t)
	dir := filepath.Join(testutil.SharedDir(t, 0o755), "amdrun")
	s.rootPrepared(dir)
	holder := holdFile(t, a, dir, ".lock")
	who := fmt.Sprintf("stayed held by pid %d (%s: flock --exclusive .lock /usr/bin/env /bin/sleep 120), started ", holder.Process.Pid, a.Name)
	for _, tt := range []struct {
		args     []string
		min, max time.Duration
		prefix   string
	}{
		{[]string{"--wait=1s"}, time.Second, 5 * time.Second, "amdrun: gave up waiting for devices after 1s: lease: the node lock "},
		{nil, 3 * time.Second, 8 * time.Second, "amdrun: lease: the node lock "},
	} {
		args := append(slices.Clone(tt.args), "--ngpus", "2", "--no-python", "/bin/true")
		r, took := s.run(&v, s.envFor(dir), 30*time.Second, args...)
		line := oneError(t, r)
		if r.code != 1 || !strings.HasPrefix(line, tt.prefix) || !strings.Contains(line, who) {
			t.Errorf("%v: exit %d, want 1 with %q naming %q:\n%s", tt.args, r.code, tt.prefix, who, r.stderr)
		}
		if took < tt.min || took > tt.max {
			t.Errorf("%v: ended after %v, want between %v and %v", tt.args, took, tt.min, tt.max)
		}
		t.Logf("%v: failed after %v: %s", tt.args, took.Round(time.Millisecond), line)
	}
	// ps does not need the node lock.
	if r, took := s.run(&v, s.envFor(dir), 30*time.Second, "ps"); r.code != 0 || took > 3*time.Second {
		t.Errorf("ps while the node lock is held: exit %d after %v", r.code, took)
	}
}

// fakeTicket is what user A runs to hold a ticket in DIR/queue that no
// job stands behind: a file named as amdrun names its tickets (uid, pid,
// start time, inode), asking for need devices, locked until the test
// ends.
const fakeTicket = `import fcntl, os, sys, time
st = open("/proc/self/stat").read()
start = st[st.rindex(")") + 2:].split()[19]
tmp = os.path.join(sys.argv[1], "fake-%d" % os.getpid())
fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, ('{"need":%s}' % sys.argv[2]).encode())
fcntl.flock(fd, fcntl.LOCK_EX)
os.rename(tmp, os.path.join(sys.argv[1], "%d-%d-%s-%d.lock" % (os.geteuid(), os.getpid(), start, os.fstat(fd).st_ino)))
print("ready", flush=True)
time.sleep(120)
`

// holdTickets has u hold n fake tickets for need devices in the queue of
// the lease directory dir, returning once all are held.
func holdTickets(t *testing.T, u testutil.User, dir string, n, need int) {
	t.Helper()
	for range n {
		cmd := u.Command("/usr/bin/python3", "-c", fakeTicket, filepath.Join(dir, "queue"), strconv.Itoa(need))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
		if line, err := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
			t.Fatalf("fake ticket: %q, %v\n%s", line, err, errb.String())
		}
	}
}

// queueOf is the queue ps --json shows for dir, as root.
func (s *shared) queueOf(dir string) []struct {
	PID  int    `json:"pid"`
	User string `json:"user"`
	Need int    `json:"need"`
} {
	s.t.Helper()
	r, _ := s.run(nil, s.envFor(dir), 20*time.Second, "ps", "--json")
	var ps struct {
		Queue []struct {
			PID  int    `json:"pid"`
			User string `json:"user"`
			Need int    `json:"need"`
		} `json:"queue"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &ps); err != nil {
		s.t.Fatalf("ps --json: %v\n%s", err, r.stdout)
	}
	return ps.Queue
}

// TestAttackQueue: user A breaks the waiting queue: a 0755 queue/ of A's
// in a shared directory; in a root-prepared one, a ticket of the old
// format, ten fake tickets kept locked (issue 26: 32 s, about 3 s each),
// one fake ticket for all 8 devices while 7 are free (issue 26: a
// 2-device job waited out its whole deadline), 20,000 junk files. V's
// --wait job still starts: behind fakes after one patience (3 s) at
// most once devices are free, past the 8-device fake at once; and V's
// wait message and ps name A's tickets.
func TestAttackQueue(t *testing.T) {
	s := newShared(t)
	v, a := testutil.NewUser(t), testutil.NewUser(t)
	for _, attack := range []string{"queue-0755-of-another-user", "old-format-ticket", "ten-fake-tickets", "fake-8-device-ticket", "junk"} {
		t.Run(attack, func(t *testing.T) {
			dir := filepath.Join(testutil.SharedDir(t, 0o755), "amdrun")
			holding := 8
			switch attack {
			case "queue-0755-of-another-user":
				os.Mkdir(dir, 0o777)
				syscall.Chmod(dir, 0o1777)
				if err := sh(a, "mkdir", "-m", "755", filepath.Join(dir, "queue")); err != nil {
					t.Fatal(err)
				}
			case "old-format-ticket":
				s.rootPrepared(dir)
				ticket := filepath.Join(dir, "queue", fmt.Sprintf("%020d-%010d.lock", 1, 1))
				if err := sh(a, "touch", ticket); err != nil {
					t.Fatal(err)
				}
				holdFile(t, a, filepath.Dir(ticket), filepath.Base(ticket))
			case "ten-fake-tickets":
				s.rootPrepared(dir)
				holdTickets(t, a, dir, 10, 1)
			case "fake-8-device-ticket":
				s.rootPrepared(dir)
				holdTickets(t, a, dir, 1, 8)
				holding = 1
			case "junk":
				s.rootPrepared(dir)
				if err := sh(a, "/usr/bin/python3", "-c", "import sys\nfor i in range(20000): open('%s/%d-%d-%d.lock' % (sys.argv[1], int(sys.argv[2]), i, i), 'w').write('{\"need\":1}')",
					filepath.Join(dir, "queue"), strconv.Itoa(a.UID)); err != nil {
					t.Fatal(err)
				}
				holdTickets(t, a, dir, 1, 1)
			}
			// Root's jobs hold all 8 devices, 8 - holding of them for 2
			// seconds, the others for the whole test: V has to queue.
			job, jobErr := s.start(nil, s.envFor(dir), "--ngpus", strconv.Itoa(holding), "--no-python", "/bin/sleep", map[bool]string{true: "2", false: "120"}[holding == 8])
			s.waitLeased(dir, holding, job, jobErr)
			if holding < 8 {
				short, shortErr := s.start(nil, s.envFor(dir), "--ngpus", strconv.Itoa(8-holding), "--no-python", "/bin/sleep", "2")
				s.waitLeased(dir, 8, short, shortErr)
			}
			if strings.Contains(attack, "fake") || attack == "junk" {
				q := s.queueOf(dir)
				if want := map[string]int{"ten-fake-tickets": 10, "fake-8-device-ticket": 1, "junk": 1}[attack]; len(q) != want || q[0].User != a.Name {
					t.Errorf("ps --json queue = %+v, want %d tickets of %s", q, want, a.Name)
				}
			}
			r, took := s.run(&v, s.envFor(dir), 40*time.Second, "--wait=30s", "--ngpus", "2", "--no-python", "/bin/true")
			if r.code != 0 {
				t.Fatalf("--wait=30s: exit %d after %v\n%s", r.code, took, r.stderr)
			}
			t.Logf("--wait job started and ended %v after joining the queue", took.Round(time.Millisecond))
			if took > 15*time.Second {
				t.Errorf("--wait job took %v: starved", took)
			}
			if holding < 8 && job.ProcessState != nil {
				t.Errorf("the holding job ended before V's job: backfill not shown")
			}
			if strings.Contains(attack, "fake") && !strings.Contains(r.stderr, "behind ") || strings.Contains(attack, "fake") && !strings.Contains(r.stderr, a.Name+" (pid ") {
				t.Errorf("V's wait message does not name A's tickets ahead:\n%s", r.stderr)
			}
		})
	}
}

// TestAttackQueueLimit: a user with MaxTicketsPerUser (16) tickets in the
// queue is refused another --wait job, in one line naming the limit.
func TestAttackQueueLimit(t *testing.T) {
	s := newShared(t)
	a := testutil.NewUser(t)
	dir := filepath.Join(testutil.SharedDir(t, 0o755), "amdrun")
	s.rootPrepared(dir)
	holdTickets(t, a, dir, 16, 1)
	job, jobErr := s.start(nil, s.envFor(dir), "--ngpus", "8", "--no-python", "/bin/sleep", "120")
	s.waitLeased(dir, 8, job, jobErr)
	r, _ := s.run(&a, s.envFor(dir), 40*time.Second, "--wait=30s", "--ngpus", "2", "--no-python", "/bin/true")
	if line := oneError(t, r); r.code == 0 || !strings.Contains(line, "at most 16 per user") || !strings.Contains(line, a.Name) {
		t.Errorf("a 17th ticket: exit %d, %q; want a refusal naming the limit and the user", r.code, line)
	}
}

// TestAttackFallbackSplit: a symlink planted at /run/lock/amdrun (here
// in a private mount namespace with its own /run) must not send users to
// private directories where both get every device: amdrun refuses it.
func TestAttackFallbackSplit(t *testing.T) {
	s := newShared(t)
	v, a := testutil.NewUser(t), testutil.NewUser(t)
	target := testutil.SharedDir(t, 0o755)
	if err := os.Chown(target, a.UID, a.GID); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	env := setEnv(s.env, "AMDRUN_LEASE_DIR", "")
	env = setEnv(env, "TMPDIR", testutil.SharedDir(t, 0o1777)) // where the old fallback went
	cmd.Env = append(env, helperEnv+"=split", "SPLIT_BIN="+amdrunBin, "SPLIT_TOPO="+s.topo, "SPLIT_TARGET="+target,
		fmt.Sprintf("SPLIT_V=%d:%d", v.UID, v.GID), fmt.Sprintf("SPLIT_A=%d:%d", a.UID, a.GID))
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("split helper: %v\n%s", err, out)
	}
	var res splitResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("split helper printed %q: %v", out, err)
	}
	if res.VCode == 0 && res.ACode == 0 {
		t.Fatalf("both users' jobs ran on all 8 devices (each leased them in a directory of its own)\nV: %s\nA: %s", res.VStderr, res.AStderr)
	}
	for who, e := range map[string]string{"V": res.VStderr, "A": res.AStderr} {
		if !strings.Contains(e, "/run/lock/amdrun: unsafe path: lease directory is a symlink (owned by "+a.Name) {
			t.Errorf("%s's job should refuse the symlink, naming its owner:\n%s", who, e)
		}
	}
}

type splitResult struct {
	VStderr, AStderr string
	VCode, ACode     int
}

// splitHelper runs in a new mount namespace as root: a tmpfs /run with
// /run/lock (01777) holding A's symlink amdrun -> SPLIT_TARGET; V starts
// a job on all 8 devices that lasts until A has run one too.
func splitHelper() int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "split:", err); return 2 }
	if err := unix.Mount("tmpfs", "/run", "tmpfs", 0, "mode=0755"); err != nil {
		return fail(err)
	}
	if err := os.Mkdir("/run/lock", 0o777); err != nil {
		return fail(err)
	}
	syscall.Chmod("/run/lock", 0o1777)
	ids := func(env string) (int, int) {
		u, g, _ := strings.Cut(os.Getenv(env), ":")
		uid, _ := strconv.Atoi(u)
		gid, _ := strconv.Atoi(g)
		return uid, gid
	}
	vu, vg := ids("SPLIT_V")
	au, ag := ids("SPLIT_A")
	if err := os.Symlink(os.Getenv("SPLIT_TARGET"), "/run/lock/amdrun"); err != nil {
		return fail(err)
	}
	os.Lchown("/run/lock/amdrun", au, ag)
	as := func(uid, gid int, args ...string) *exec.Cmd {
		argv := append([]string{"--reuid", strconv.Itoa(uid), "--regid", strconv.Itoa(gid), "--clear-groups", "--", os.Getenv("SPLIT_BIN"),
			"--topology", os.Getenv("SPLIT_TOPO")}, args...)
		c := exec.Command("setpriv", argv...)
		c.Dir = "/"
		return c
	}
	var res splitResult
	// V's job lasts until A's has run: its rank 0 reads this pipe to
	// its end (the other ranks read /dev/null and are done at once), so
	// whether V got the devices is its exit status, not a timing.
	vjob := as(vu, vg, "--ngpus", "8", "--no-python", "/bin/cat")
	var verr bytes.Buffer
	vjob.Stderr = &verr
	hold, err := vjob.StdinPipe()
	if err != nil {
		return fail(err)
	}
	if err := vjob.Start(); err != nil {
		return fail(err)
	}
	ajob := as(au, ag, "--ngpus", "8", "--no-python", "/bin/true")
	var aerr bytes.Buffer
	ajob.Stderr = &aerr
	err = ajob.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.ACode = ee.ExitCode()
	} else if err != nil {
		return fail(err)
	}
	hold.Close()
	err = vjob.Wait()
	if errors.As(err, &ee) {
		res.VCode = ee.ExitCode()
	} else if err != nil {
		return fail(err)
	}
	res.VStderr, res.AStderr = verr.String(), aerr.String()
	json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// TestAttackRenameExchange: user A owns the parent of --lease-dir and
// swaps, in a loop (renameat2 RENAME_EXCHANGE), the lease directory (or
// its parent) with a symlink to a directory of root's. Root's amdrun, run
// a few hundred times meanwhile, never makes a file there.
func TestAttackRenameExchange(t *testing.T) {
	s := newShared(t)
	a := testutil.NewUser(t)
	helper := testutil.PublicCopy(t, os.Args[0])
	const runs = 150
	for _, level := range []string{"lease-dir", "parent"} {
		t.Run(level, func(t *testing.T) {
			base := testutil.SharedDir(t, 0o755)
			victim := filepath.Join(base, "victim") // root's
			if err := os.MkdirAll(filepath.Join(victim, "leases"), 0o755); err != nil {
				t.Fatal(err)
			}
			owned := filepath.Join(base, "attacker")
			var leaseDir, swapIn string
			if level == "lease-dir" {
				// attacker/leases <-> attacker/swap -> victim
				leaseDir, swapIn = filepath.Join(owned, "leases"), owned
				os.MkdirAll(leaseDir, 0o777)
				os.Symlink(victim, filepath.Join(owned, "swap"))
			} else {
				// attacker/leases/.. swapped: attacker/p <-> attacker/swap -> victim
				leaseDir, swapIn = filepath.Join(owned, "leases", "leases"), owned
				os.MkdirAll(leaseDir, 0o777)
				os.Symlink(victim, filepath.Join(owned, "swap"))
			}
			filepath.WalkDir(owned, func(p string, d fs.DirEntry, err error) error {
				if err == nil {
					os.Lchown(p, a.UID, a.GID)
				}
				return nil
			})
			ex := a.Command(helper, "-test.run=^$")
			ex.Args = append(ex.Args, swapIn, "leases", "swap")
			ex.Env = append(os.Environ(), helperEnv+"=exchange")
			stdout, _ := ex.StdoutPipe()
			if err := ex.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ex.Process.Kill(); ex.Wait() })
			buf := make([]byte, 6)
			if n, _ := stdout.Read(buf); string(buf[:n]) != "ready\n" {
				t.Fatalf("exchanger: %q", buf[:n])
			}
			ok, refused := 0, 0
			for i := range runs {
				r, _ := s.run(nil, s.envFor(leaseDir), 30*time.Second, "--ngpus", "1", "--no-python", "/bin/true")
				switch r.code {
				case 0:
					ok++
				case 1:
					refused++
					line := oneError(t, r)
					if !strings.Contains(line, "unsafe path") && !strings.Contains(line, "was moved or replaced") {
						t.Errorf("run %d: %s", i, line)
					}
				default:
					t.Errorf("run %d: exit %d\n%s", i, r.code, r.stderr)
				}
			}
			var made []string
			filepath.WalkDir(victim, func(p string, d fs.DirEntry, err error) error {
				if err == nil && p != victim && p != filepath.Join(victim, "leases") {
					made = append(made, p)
				}
				return nil
			})
			t.Logf("%d runs of root's amdrun against the exchange loop: %d leased, %d refused; files made in root's directory: %d", runs, ok, refused, len(made))
			if len(made) > 0 {
				t.Errorf("root's amdrun made files through the swapped symlink: %q", made)
			}
			if ok == 0 || refused == 0 {
				t.Errorf("the race did not bite both ways: %d leased, %d refused", ok, refused)
			}
		})
	}
}

// TestAttackForgedHolderAndEscapes: user A holds device 0 in a shared
// directory, having written into its own lease file that the holder is
// root's pid 1, with terminal escapes and a 5000-byte word in the
// command line of the holding process. ps and errors name A's real
// process, escaped and cut.
func TestAttackForgedHolderAndEscapes(t *testing.T) {
	s := newShared(t)
	v, a := testutil.NewUser(t), testutil.NewUser(t)
	dir := filepath.Join(testutil.SharedDir(t, 0o755), "amdrun")
	os.Mkdir(dir, 0o777)
	syscall.Chmod(dir, 0o1777)
	lock := filepath.Join(dir, "gpu0.lock")
	if err := sh(a, "touch", lock); err != nil {
		t.Fatal(err)
	}
	forged := `{"pid": 1, "user": "root", "uid": 0, "start": "2020-01-01T00:00:00Z", "command": "/sbin/init"}`
	if err := os.WriteFile(lock, []byte(forged), 0o644); err != nil { // A's file keeps A as owner
		t.Fatal(err)
	}
	escapes := "X=\x1b]0;pwned\x07\x1b[2J\u009b31m\u202eevil"
	long := "Y=" + strings.Repeat("z", 5000)
	holder := holdFile(t, a, dir, "gpu0.lock", escapes, long)

	r, _ := s.run(&v, s.envFor(dir), 30*time.Second, "ps")
	if want := fmt.Sprintf("0\tgpu0\t0\tleased\tpid %d, user %s, started ", holder.Process.Pid, a.Name); !strings.Contains(r.stdout, want) {
		t.Errorf("ps: want %q (A's flock process), got:\n%s", want, r.stdout)
	}
	r, _ = s.run(&v, s.envFor(dir), 30*time.Second, "ps", "--json")
	var ps struct {
		Devices []struct {
			Holder *struct {
				PID     int    `json:"pid"`
				UID     int    `json:"uid"`
				User    string `json:"user"`
				Command string `json:"command"`
			} `json:"holder"`
		} `json:"devices"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &ps); err != nil {
		t.Fatalf("ps --json: %v\n%s", err, r.stdout)
	}
	h := ps.Devices[0].Holder
	if h == nil || h.PID != holder.Process.Pid || h.UID != a.UID || h.User != a.Name {
		t.Fatalf("ps --json holder %+v, want A's flock (pid %d, uid %d)", h, holder.Process.Pid, a.UID)
	}
	if !strings.Contains(h.Command, `X=\x1b]0;pwned\x07\x1b[2J\u009b31m\u202eevil`) || len([]rune(h.Command)) > 200 || controls(h.Command) {
		t.Errorf("ps --json command %q: want the escapes written out and at most 200 runes", h.Command)
	}
	r, _ = s.run(&v, s.envFor(dir), 30*time.Second, "--devices", "0", "--no-python", "/bin/true")
	line := oneError(t, r)
	if r.code != 1 || !strings.Contains(line, fmt.Sprintf("leased by pid %d (%s: flock --exclusive gpu0.lock /usr/bin/env X=\\x1b]0;pwned", holder.Process.Pid, a.Name)) {
		t.Errorf("error %q should name A's process, escaped", line)
	}
	if controls(strings.ReplaceAll(r.stderr, "\n", "")) || len(line) > 400 {
		t.Errorf("stderr holds raw control characters or a %d-byte line: %q", len(line), r.stderr)
	}
	if strings.Contains(r.stderr, "pid 1 ") || strings.Contains(r.stderr, "(root") || strings.Contains(r.stderr, "/sbin/init") || strings.Contains(r.stderr, "00:00:00") {
		t.Errorf("the forged holder was believed:\n%s", r.stderr)
	}
}

// controls reports C0, DEL or C1 control characters in s.
func controls(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || (r >= 0x7f && r <= 0x9f) })
}

// TestAttackTopologyInputs: a saved topology that is /dev/zero or a FIFO
// fails at once, on one line.
func TestAttackTopologyInputs(t *testing.T) {
	testutil.EndToEnd(t)
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/dev/zero", fifo} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, amdrunBin, "--topology", path, "topo")
		cmd.Env = cleanEnv(t)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		start := time.Now()
		err := cmd.Run()
		took := time.Since(start)
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || took > 2*time.Second {
			t.Errorf("--topology %s: %v after %v, want exit 1 at once", path, err, took)
		}
		if want := "amdrun: topology file " + path + ": not a regular file\n"; errb.String() != want {
			t.Errorf("--topology %s: stderr %q, want %q", path, errb.String(), want)
		}
	}
}

// TestAttackLogDirSymlink: user A plants links in a log directory A owns
// and every user can write: the names amdrun once used (rank0.stderr,
// amdrun.log) pointing at a file of root's, and a run directory named
// after the job's --rdzv-id pointing at a directory of root's. Root's job
// with --log-dir there follows none of them and writes nothing outside
// its own fresh run directory (issue 14).
func TestAttackLogDirSymlink(t *testing.T) {
	s := newShared(t)
	a := testutil.NewUser(t)
	private := testutil.SharedDir(t, 0o700)
	precious := filepath.Join(private, "precious")
	if err := os.WriteFile(precious, []byte("root's data\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := sha256.Sum256([]byte("root's data\n"))
	// A's own directory, 0777 and not sticky: fs.protected_symlinks
	// (which guards only sticky world-writable directories) does not stop
	// root from following A's symlink there.
	logs := filepath.Join(testutil.SharedDir(t, 0o755), "logs")
	if err := os.Mkdir(logs, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(logs, 0o777)
	os.Chown(logs, a.UID, a.GID)
	for name, target := range map[string]string{"rank0.stderr": precious, "amdrun.log": precious, "job1": private} {
		if err := sh(a, "ln", "-s", target, filepath.Join(logs, name)); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := s.run(nil, s.env, 30*time.Second, "--log-dir", logs, "--rdzv-id", "job1", "--ngpus", "1", "--no-python", pythonPath(), "-c",
		"import sys; sys.stderr.write('from rank 0\\n')")
	if b, _ := os.ReadFile(precious); sha256.Sum256(b) != before {
		t.Fatalf("--log-dir followed a planted symlink: root's file now holds %q", b)
	}
	if ents, _ := os.ReadDir(private); len(ents) != 1 {
		t.Errorf("root's private directory holds %d entries, want only precious", len(ents))
	}
	if r.code != 0 {
		t.Errorf("job with --log-dir: exit %d\n%s", r.code, r.stderr)
	}
	for _, name := range []string{"rank0.stderr", "amdrun.log", "job1"} {
		if fi, err := os.Lstat(filepath.Join(logs, name)); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("the planted symlink %s was replaced: %v", name, err)
		}
	}
	m, _ := filepath.Glob(filepath.Join(logs, "job1_????????", "attempt_0", "0", "stderr.log"))
	if len(m) != 1 {
		t.Fatalf("no job1_XXXXXXXX/attempt_0/0/stderr.log in the log directory: %v", m)
	}
	if b, _ := os.ReadFile(m[0]); string(b) != "from rank 0\n" {
		t.Errorf("%s = %q", m[0], b)
	}
}

// TestAttackErrorFileTMPDIR: root's job with TMPDIR owned by user A (who
// could rename amdrun-errors-* and put a link or a forged file in its
// place) keeps its ranks' error files out of A's directory: the rank's
// TORCHELASTIC_ERROR_FILE is elsewhere, and nothing of root's is left in
// A's TMPDIR (issue 26: root's exception text landed in A's directory,
// and A's forged text was printed as the rank's).
func TestAttackErrorFileTMPDIR(t *testing.T) {
	s := newShared(t)
	a := testutil.NewUser(t)
	tmp := filepath.Join(testutil.SharedDir(t, 0o1777), "a-tmp")
	if err := sh(a, "mkdir", "-m", "0777", tmp); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(testutil.SharedDir(t, 0o755), "leases")
	env := setEnv(s.envFor(dir), "TMPDIR", tmp)
	r, _ := s.run(nil, env, 30*time.Second, "--ngpus", "0", "--nproc-per-node", "1", "--no-python", "/bin/sh", "-c", `echo "ef=$TORCHELASTIC_ERROR_FILE"; echo '{"message": "root secret"}' > "$TORCHELASTIC_ERROR_FILE"; exit 1`)
	i := strings.Index(r.stdout, "ef=")
	if r.code != 1 || i < 0 {
		t.Fatalf("exit %d, stdout %q:\n%s", r.code, r.stdout, r.stderr)
	}
	ef := strings.TrimSpace(r.stdout[i+3:])
	if ef == "" || strings.HasPrefix(ef, tmp+"/") {
		t.Errorf("the rank's error file %q is in A's TMPDIR %s", ef, tmp)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("root's job left %d entries in A's TMPDIR", len(ents))
	}
	if !strings.Contains(r.stderr, "root secret") {
		t.Errorf("the summary lost the rank's own exception:\n%s", r.stderr)
	}
}

// shadowState is what amdrun must never change of /etc/shadow, a planted
// link's target: its owner, mode and every line but the throwaway users'
// ("amdt..."), which other packages' tests, running at the same time,
// add and remove with useradd and userdel.
func shadowState(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/etc/shadow")
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat("/etc/shadow", &st); err != nil {
		t.Fatal(err)
	}
	keep := []string{fmt.Sprintf("owner %d:%d mode %o", st.Uid, st.Gid, st.Mode)}
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "amdt") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
