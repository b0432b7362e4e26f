//go:build linux

package launch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/testutil"
)

// marked lists the live processes of the job marked with mark.
func marked(mark string) []int { return testutil.WithEnv(envMark + "=" + mark) }

// newMark is a mark no other test's processes carry.
func newMark(t *testing.T) string {
	return fmt.Sprintf("%s-%d-%d", t.Name(), os.Getpid(), time.Now().UnixNano())
}

// containModes are the containments to test on this machine: every
// mode auto may choose that can be set up here (the guards alone always,
// a PID namespace as root, a user namespace where the kernel permits one).
func containModes(tb testing.TB) []Containment {
	tb.Helper()
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	var out []Containment
	for _, m := range modes {
		if m.auto == 0 {
			continue
		}
		c, err := m.open(containOpts{self: self, note: func(string) {}})
		if err != nil {
			tb.Logf("not testing %s: %v", m.name, err)
			continue
		}
		c.close()
		out = append(out, m.name)
	}
	return out
}

// startLauncher starts cmd, the test binary as a mini launcher, reads its
// output until both workers are ready and returns their pids by rank, and
// its stderr; the rest of its output is drained. The test fails when the
// launcher does not get there within 30 s.
func startLauncher(t *testing.T, cmd *exec.Cmd) (map[int]int, *syncBuffer) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pm := map[int]int{}
	ready := 0
	sc := bufio.NewScanner(stdout)
	deadline := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	// The ranks may say "ready" before Run reports their pids (OnStart
	// comes once every guard has named its rank): wait for both.
	for (ready < 2 || len(pm) < 2) && sc.Scan() {
		var rank, pid int
		if _, err := fmt.Sscanf(sc.Text(), "pid %d %d", &rank, &pid); err == nil {
			pm[rank] = pid
		}
		if strings.HasSuffix(sc.Text(), "]: ready") {
			ready++
		}
	}
	deadline.Stop()
	go func() {
		for sc.Scan() {
		}
	}()
	if ready < 2 || len(pm) != 2 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("launcher: %d ready, pids %v; stderr:\n%s", ready, pm, stderr.String())
	}
	return pm, stderr
}

func TestParseContainment(t *testing.T) {
	for in, want := range map[string]Containment{"auto": ContainAuto, "Subreaper": ContainSubreaper, " pid-namespace": ContainPIDNamespace} {
		if got, err := ParseContainment(in); got != want || err != nil {
			t.Errorf("ParseContainment(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
	if _, err := ParseContainment("cgroup"); err == nil || err.Error() != `contain: unknown mode "cgroup" (valid: auto, pid-namespace, user-namespace, subreaper)` {
		t.Errorf("ParseContainment(cgroup) error = %v", err)
	}
	if ContainAuto.String() != "auto" || ContainSubreaper.String() != "subreaper" {
		t.Errorf("String: %s, %s", ContainAuto, ContainSubreaper)
	}
}

func TestGuardArgvParses(t *testing.T) {
	bound := &plan.Rank{CPUs: []int{0, 1, 2}, Mems: []int{0}, MemPolicy: plan.MemBind, Argv: []string{"python3", "-u", "t.py", "--", "--guard"}}
	sa, err := parseShimArgs(guardArgv("/bin/amdrun", bound)[2:])
	if err != nil {
		t.Fatal(err)
	}
	want := &shimArgs{cpus: []int{0, 1, 2}, mems: []int{0}, policy: plan.MemBind, guard: true, argv: bound.Argv}
	if !reflect.DeepEqual(sa, want) {
		t.Errorf("bound: %+v, want %+v", sa, want)
	}
	sa, err = parseShimArgs(guardArgv("/bin/amdrun", &plan.Rank{Argv: []string{"./a.out"}})[2:])
	if err != nil || !sa.guard || sa.cpus != nil || sa.policy != plan.MemNone || !reflect.DeepEqual(sa.argv, []string{"./a.out"}) {
		t.Errorf("unbound: %+v, %v", sa, err)
	}
}

func TestProcParsers(t *testing.T) {
	for line, want := range map[string]int{
		"42 (python3) S 7 42 42 0 -1":       7,
		"43 (a b) c)) R 1 43 43 0 -1":       1,
		"44 (pt_main_thread) Z 4242 1 1 0 ": 4242,
	} {
		if got, ok := statParent([]byte(line)); !ok || got != want {
			t.Errorf("statParent(%q) = %d, %v, want %d", line, got, ok, want)
		}
	}
	if _, ok := statParent([]byte("garbage")); ok {
		t.Error("statParent(garbage) ok")
	}
	if s := statState([]byte("44 (x) y) Z 1")); s != 'Z' {
		t.Errorf("statState = %q", s)
	}
	status := "Name:\tpython3\nTgid:\t9156\nNSpid:\t9156\t12\nPPid:\t1\n"
	if got := innermostPID([]byte(status)); got != 12 {
		t.Errorf("innermostPID = %d, want 12", got)
	}
	if got := innermostPID([]byte("Name:\tx\nNSpid:\t77\n")); got != 77 {
		t.Errorf("innermostPID, one namespace = %d, want 77", got)
	}
	if got := innermostPID([]byte("Name:\tx\n")); got != 0 {
		t.Errorf("innermostPID, no NSpid = %d, want 0", got)
	}
}

// TestRunSweepsWhatRanksLeave: ranks that exit 0 leaving a child in their
// process group, one in a session of its own and a double-forked one:
// when Run returns, none of them is left, in every containment.
func TestRunSweepsWhatRanksLeave(t *testing.T) {
	testutil.EndToEnd(t)
	for _, mode := range containModes(t) {
		t.Run(mode.String(), func(t *testing.T) {
			mark := newMark(t)
			p, dir := workerPlan(t, 2, "escape", envMark+"="+mark)
			code, err := Run(context.Background(), p, RunOptions{Stdout: newBuf(0), Stderr: newBuf(0), Contain: mode})
			left := marked(mark)
			if code != 0 || err != nil {
				t.Fatalf("Run = %d, %v", code, err)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "rank*.escapee*"))
			if len(files) != 6 {
				t.Fatalf("%d escapees started, want 6: %v", len(files), files)
			}
			if len(left) > 0 {
				for _, pid := range left {
					syscall.Kill(pid, syscall.SIGKILL)
				}
				t.Errorf("%d process(es) of the job outlived Run: %v", len(left), left)
			}
		})
	}
}

// orphanDeadline ends TestKillLauncherLeavesNothing when a process of the
// job outlives the launcher: what it left lives until killed, so no load
// brings a clean job near it.
const orphanDeadline = 30 * time.Second

// TestKillLauncherLeavesNothing SIGKILLs a whole launcher (the test
// binary as a mini amdrun) whose ranks left escapees: within a second
// nothing of the job is left, and the file it held locked (as a device
// lease) stays locked until the last of them is gone.
func TestKillLauncherLeavesNothing(t *testing.T) {
	testutil.EndToEnd(t)
	for _, mode := range containModes(t) {
		t.Run(mode.String(), func(t *testing.T) {
			mark := newMark(t)
			dir := t.TempDir()
			lock := filepath.Join(dir, "lease.lock")
			tmp := t.TempDir() // where the launcher makes the ranks' error file directory
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(withoutEnv(os.Environ(), envWorker), envLauncher+"="+dir, envMark+"="+mark,
				envEscape+"=1", envContain+"="+mode.String(), envHold+"="+lock, "TMPDIR="+tmp)
			pm, _ := startLauncher(t, cmd)
			// The pids reported are the ranks' own, as this process sees
			// them (not their guards', not those inside a namespace).
			for rank, pid := range pm {
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
				if strings.Contains(string(cmdline), ShimArg) || !strings.Contains(string(environ), fmt.Sprintf("\x00RANK=%d\x00", rank)) {
					t.Errorf("pid %d reported for rank %d is not that rank: %q", pid, rank, cmdline)
				}
			}
			// 2 ranks, 2 guards, 6 escapees (and a keeper).
			if n := len(marked(mark)); n < 10 {
				t.Fatalf("%d processes of the job before the kill, want at least 10", n)
			}
			before := testutil.Snapshot(marked(mark))
			killed := time.Now()
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			f, err := os.Open(lock)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for {
				left := testutil.Left(envMark+"="+mark, before)
				free := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil
				if now := testutil.Left(envMark+"="+mark, before); free && len(now) > 0 {
					t.Errorf("the held lock was free while %d process(es) of the job lived", len(now))
				}
				if len(left) == 0 {
					t.Logf("clean %v after the SIGKILL; lock free: %v", time.Since(killed).Round(time.Millisecond), free)
					if mode == ContainUserNamespace {
						// The guards died with the launcher: the next
						// run removes the error file directory.
						t.Setenv("TMPDIR", tmp)
						next, err := newErrorDir()
						if err != nil {
							t.Fatal(err)
						}
						next.remove()
					}
					// Nor a file: the ranks' error files went with them.
					if m, _ := filepath.Glob(filepath.Join(tmp, "*")); len(m) > 0 {
						t.Errorf("left in TMPDIR: %v", m)
					}
					break
				}
				// The escapees sleep until killed, so one the launcher's
				// death misses lives on: the deadline only ends the test
				// then, it times nothing (the time to clean is logged above
				// and measured in TestSIGKILLLeavesNothing's figures), and a
				// loaded machine cannot reach it.
				if time.Since(killed) > orphanDeadline {
					for _, pid := range left {
						syscall.Kill(pid, syscall.SIGKILL)
					}
					t.Fatalf("%d process(es) of the job outlived the SIGKILLed launcher by %v: %v", len(left), orphanDeadline, left)
				}
				time.Sleep(5 * time.Millisecond)
			}
			// The lock goes once the last holder is gone, and with it
			// the job: not even a zombie rank is left by then.
			for end := time.Now().Add(orphanDeadline); unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(end) {
					t.Fatalf("the held lock was still taken %v after the job was gone", orphanDeadline)
				}
			}
			for rank, pid := range pm {
				if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
					t.Errorf("rank %d (pid %d) still exists once the lock is free: %v", rank, pid, err)
				}
			}
		})
	}
}

// TestRunInterruptGivesEveryRankItsGrace: after a forwarded SIGINT, a
// rank that exits 130 at once is stopped, not failed: the other rank's
// 1.5 s handler still runs to its end.
func TestRunInterruptGivesEveryRankItsGrace(t *testing.T) {
	testutil.EndToEnd(t)
	p, dir := workerPlan(t, 2, "interrupt")
	errb := newBuf(0)
	if code := runAndSignal(t, p, RunOptions{Stderr: errb, Grace: 10 * time.Second}, 2, syscall.SIGINT); code != 130 {
		t.Errorf("Run = %d, want 130", code)
	}
	for r := 0; r < 2; r++ {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("rank%d.handled", r))); err != nil {
			t.Errorf("rank %d's SIGINT handler did not complete: %v", r, err)
		}
	}
	if s := errb.String(); !strings.Contains(s, "0 of 2 ranks failed, 2 stopped by amdrun") || strings.Contains(s, "root cause") {
		t.Errorf("summary:\n%s", s)
	}
}

// TestRunClosedConsole: a console that went away (every write fails with
// EPIPE) does not stop the job: the ranks' output still reaches the log
// files, the exit code is the job's, and the summary is in amdrun.log.
func TestRunClosedConsole(t *testing.T) {
	testutil.EndToEnd(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer w.Close()
	p, _ := workerPlan(t, 2, "lines")
	p.RunID = "first"
	logs := t.TempDir()
	code, err := Run(context.Background(), p, RunOptions{Stdout: w, Stderr: w, LogDir: logs, Prefix: true})
	if code != 0 || err != nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	for rank := 0; rank < 2; rank++ {
		b, _ := os.ReadFile(filepath.Join(runDir(t, logs, "first"), "attempt_0", strconv.Itoa(rank), "stdout.log"))
		if n := strings.Count(string(b), "\n"); n != 200 {
			t.Errorf("rank %d's stdout.log has %d lines, want 200", rank, n)
		}
	}

	p, _ = workerPlan(t, 2, "fail", envFailRank+"=1")
	p.RunID = "second"
	code, err = Run(context.Background(), p, RunOptions{Stdout: w, Stderr: w, LogDir: logs, Grace: 5 * time.Second})
	if code != 3 || err != nil {
		t.Fatalf("failing job: Run = %d, %v, want 3", code, err)
	}
	b, _ := os.ReadFile(filepath.Join(runDir(t, logs, "second"), "amdrun.log"))
	if !strings.Contains(string(b), "amdrun: 1 of 2 ranks failed") || !strings.Contains(string(b), "rank 1 error line 14") {
		t.Errorf("amdrun.log:\n%s", b)
	}
}

// TestRankThatShedsItsGuard (issue 26, class 3): a rank clears its
// parent-death signal, leaves three escapees and SIGKILLs its guard. In
// every containment, when Run returns (and so before the caller lets the
// lease go) no process of the job is left, and the summary does not say
// the rank died of SIGKILL: that was its guard, and the rank lived on.
func TestRankThatShedsItsGuard(t *testing.T) {
	testutil.EndToEnd(t)
	for _, mode := range containModes(t) {
		t.Run(mode.String(), func(t *testing.T) {
			mark := newMark(t)
			p, dir := workerPlan(t, 1, "shed", envMark+"="+mark)
			out, errb := newBuf(0), newBuf(0)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			code, err := Run(ctx, p, RunOptions{Stdout: out, Stderr: errb, Contain: mode})
			left := marked(mark)
			for _, pid := range left {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			if err != nil {
				t.Fatalf("Run = %d, %v\n%s", code, err, errb)
			}
			if files, _ := filepath.Glob(filepath.Join(dir, "rank0.escapee*")); len(files) != 3 {
				t.Fatalf("%d escapees started, want 3\nstdout:\n%s\nstderr:\n%s", len(files), out, errb)
			}
			if len(left) > 0 {
				t.Errorf("%d process(es) of the job outlived Run: %v", len(left), left)
			}
			summary := errb.String()
			if code == 0 || !strings.Contains(summary, "1 of 1 ranks failed") {
				t.Errorf("exit %d; summary:\n%s", code, summary)
			}
			if strings.Contains(summary, "signal SIGKILL") {
				t.Errorf("the summary says the rank died of SIGKILL while it lived:\n%s", summary)
			}
			if !strings.Contains(summary, "its guard (pid ") || !strings.Contains(summary, "kill the rank and all it started") && !strings.Contains(summary, "killed the rank and all it started") {
				t.Errorf("the summary does not say the guard ended and what was done about the rank:\n%s", summary)
			}
			t.Logf("summary: %s", summary)
		})
	}
}

// TestStoppedGuardsDoNotKeepTheJob (issue 26, class 3): a process of the
// same user SIGSTOPs every guard over and over while the launcher is
// SIGKILLed. Where the guards are namespace inits (parent-death signal)
// or the keeper empties the namespace, nothing of the job outlives the
// launcher by more than a second, stopped or not. With the guards alone,
// the job lives as long as its guards are kept stopped (the documented
// limit of that mode), and is gone within a second once they run again.
func TestStoppedGuardsDoNotKeepTheJob(t *testing.T) {
	testutil.EndToEnd(t)
	for _, mode := range containModes(t) {
		t.Run(mode.String(), func(t *testing.T) {
			mark := newMark(t)
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(withoutEnv(os.Environ(), envWorker), envLauncher+"="+dir, envMark+"="+mark,
				envEscape+"=1", envContain+"="+mode.String(), "TMPDIR="+t.TempDir())
			startLauncher(t, cmd)
			var guards []int
			for _, pid := range marked(mark) {
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				if strings.Contains(string(cmdline), ShimArg) {
					guards = append(guards, pid)
				}
			}
			if len(guards) != 2 {
				t.Fatalf("%d guards found, want 2", len(guards))
			}
			stop := make(chan struct{})
			stopped := make(chan struct{})
			go func() {
				defer close(stopped)
				for {
					select {
					case <-stop:
						return
					default:
					}
					for _, g := range guards {
						_ = unix.Kill(g, unix.SIGSTOP)
					}
					time.Sleep(50 * time.Microsecond)
				}
			}()
			before := testutil.Snapshot(marked(mark))
			killed := time.Now()
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			gone := func(bound time.Duration) bool {
				for end := time.Now().Add(bound); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
					if len(testutil.Left(envMark+"="+mark, before)) == 0 {
						return true
					}
				}
				return false
			}
			if mode != ContainSubreaper {
				ok := gone(time.Second)
				close(stop)
				<-stopped
				if !ok {
					left := testutil.Left(envMark+"="+mark, before)
					for _, pid := range left {
						syscall.Kill(pid, syscall.SIGKILL)
					}
					t.Fatalf("%d process(es) of the job outlived the SIGKILLed launcher by 1 s with its guards stopped: %v", len(left), left)
				}
				t.Logf("clean %v after the SIGKILL, guards stopped all along", time.Since(killed).Round(time.Millisecond))
				return
			}
			close(stop)
			<-stopped
			for _, g := range guards {
				_ = unix.Kill(g, unix.SIGCONT)
			}
			if !gone(time.Second) {
				left := testutil.Left(envMark+"="+mark, before)
				for _, pid := range left {
					syscall.Kill(pid, syscall.SIGKILL)
				}
				t.Fatalf("%d process(es) of the job left 1 s after the guards ran again: %v", len(left), left)
			}
		})
	}
}

// TestNamespacePIDsSpread: two jobs in PID namespaces of their own do not
// number their ranks alike (torch's agent names a node by host and pid;
// two agents both pid 3 hung a c10d rendezvous, issue 33).
func TestNamespacePIDsSpread(t *testing.T) {
	testutil.EndToEnd(t)
	for _, mode := range containModes(t) {
		if mode == ContainSubreaper {
			continue
		}
		t.Run(string(mode), func(t *testing.T) {
			var pids []int
			for job := 0; job < 2; job++ {
				p, dir := workerPlan(t, 1, "pid")
				if code, err := Run(context.Background(), p, RunOptions{Stdout: newBuf(0), Stderr: newBuf(0), Contain: mode}); code != 0 || err != nil {
					t.Fatalf("Run = %d, %v", code, err)
				}
				b, err := os.ReadFile(filepath.Join(dir, "rank0.pid"))
				if err != nil {
					t.Fatal(err)
				}
				pid, _ := strconv.Atoi(string(b))
				pids = append(pids, pid)
			}
			if pids[0] == pids[1] || pids[0] <= pidStride {
				t.Errorf("the ranks of two jobs had pids %v in their namespaces, want distinct pids above %d", pids, pidStride)
			}
		})
	}
}

// TestProcessTreeAgreesWithChildrenFiles: the scan of /proc/*/stat that
// stands in where the kernel has no children files finds what they list.
func TestProcessTreeAgreesWithChildrenFiles(t *testing.T) {
	cmd := exec.Command("cat") // blocks on its stdin until the test ends
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	self, pid := os.Getpid(), cmd.Process.Pid
	if !slices.Contains(processTree()[self], pid) {
		t.Errorf("processTree()[%d] = %v, missing %d", self, processTree()[self], pid)
	}
	if childrenFiles() && !slices.Contains(childrenOf(self), pid) {
		t.Errorf("childrenOf(%d) = %v, missing %d", self, childrenOf(self), pid)
	}
}
