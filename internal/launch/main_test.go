//go:build linux

package launch

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"

	"testing"
)

// Environment of the fake workers: the test binary re-executed.
const (
	envWorker   = "AMDRUN_TEST_WORKER"   // the worker's mode
	envDir      = "AMDRUN_TEST_DIR"      // where workers write files
	envFailRank = "AMDRUN_TEST_FAILRANK" // the rank that fails
	envIgnore   = "AMDRUN_TEST_IGNORE"   // "TERM", "INT": signals a hanging worker ignores
	envLauncher = "AMDRUN_TEST_LAUNCHER" // run as a mini amdrun (dir)
	envMark     = "AMDRUN_TEST_MARK"     // inherited by every process of a job: how tests find them
	envEscape   = "AMDRUN_TEST_ESCAPE"   // "1": a hanging worker first leaves escapees (see escape)
	envContain  = "AMDRUN_TEST_CONTAIN"  // the mini launcher's containment
	envHold     = "AMDRUN_TEST_HOLD"     // a file the mini launcher locks and holds for its job
)

func TestMain(m *testing.M) {
	// Under -race every instrumented process sleeps a second before it
	// exits (GORACE atexit_sleep_ms, default 1000): the re-executed test
	// binary stands in for the keeper and the guards, whose exit times
	// the tests measure. Children inherit this.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	testutil.Main(m,
		testutil.Role{Arg: ShimArg, Run: func(_ string, args []string) int { return ShimMain(args) }},
		testutil.Role{Arg: KeeperArg, Run: func(_ string, args []string) int { return KeeperMain(args) }},
		testutil.Role{Env: envWorker, Run: func(mode string, _ []string) int { return fakeWorker(mode) }},
		testutil.Role{Env: envLauncher, Run: func(dir string, _ []string) int { return miniLauncher(dir) }},
	)
}

// report is what a "report" worker writes about itself.
type report struct {
	Args       []string
	Env        []string
	Cpus, Mems string // from /proc/self/status
	Policy     int    // get_mempolicy mode
	PolicyMask uint64
}

func fakeWorker(mode string) int {
	rank, _ := strconv.Atoi(os.Getenv("RANK"))
	dir := os.Getenv(envDir)
	fail := os.Getenv(envFailRank) == strconv.Itoa(rank)
	switch mode {
	case "report":
		r := report{Args: os.Args, Env: os.Environ()}
		st, _ := os.ReadFile("/proc/self/status")
		for _, l := range strings.Split(string(st), "\n") {
			if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
				r.Cpus = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(l, "Mems_allowed_list:"); ok {
				r.Mems = strings.TrimSpace(v)
			}
		}
		var mask [16]uint64
		var pol int32
		// get_mempolicy(&mode, nodemask, maxnode, 0, 0)
		_, _, e := unix.Syscall6(unix.SYS_GET_MEMPOLICY, uintptr(unsafe.Pointer(&pol)), uintptr(unsafe.Pointer(&mask[0])), 16*64, 0, 0, 0)
		if e != 0 {
			fmt.Fprintln(os.Stderr, "get_mempolicy:", e)
			return 1
		}
		r.Policy, r.PolicyMask = int(pol), mask[0]
		b, _ := json.Marshal(r)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("rank%d.json", rank)), b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "fail":
		if fail {
			waitPeers(rank, dir)
			for i := 0; i < 15; i++ {
				fmt.Fprintf(os.Stderr, "rank %d error line %d\n", rank, i)
			}
			return 3
		}
		return hang(rank, dir)
	case "nomodule":
		if fail {
			fmt.Fprintln(os.Stderr, "Traceback (most recent call last):")
			fmt.Fprintln(os.Stderr, "  File \"/w/train.py\", line 1, in <module>")
			fmt.Fprintln(os.Stderr, "ModuleNotFoundError: No module named 'torch'")
			return 1
		}
		return hang(rank, dir)
	case "selfkill":
		if fail {
			waitPeers(rank, dir)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		return hang(rank, dir)
	case "hang":
		return hang(rank, dir)
	case "pid":
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("rank%d.pid", rank)), []byte(strconv.Itoa(os.Getpid())), 0o644)
		return 0
	case "restart":
		count := os.Getenv("TORCHELASTIC_RESTART_COUNT")
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("restart%s.rank%d", count, rank)), nil, 0o644)
		if fail {
			n, _ := strconv.Atoi(count)
			if n < 2 || os.Getenv("AMDRUN_TEST_ALWAYS") != "" {
				return 1
			}
			return 0
		}
		return 0
	case "lines":
		w := bufio.NewWriterSize(os.Stdout, 1<<16)
		for i := 0; i < 200; i++ {
			line := fmt.Sprintf("rank %d line %d %s\n", rank, i, strings.Repeat("x", 50+rank*7))
			// Two writes per line, so that an unguarded copier would interleave.
			os.Stdout.WriteString(line[:20])
			os.Stdout.WriteString(line[20:])
		}
		w.Flush()
		fmt.Fprintf(os.Stderr, "rank %d done", rank) // no final newline
		return 0
	case "ready":
		os.Stdout.WriteString("ready\n")
		return 0
	case "orphan":
		// Leave a child behind in this process group, as a dataloader
		// worker would, then exit.
		c := exec.Command(os.Args[0])
		c.Env = append(os.Environ(), envWorker+"=sleeper")
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("orphan%d", rank)), []byte(strconv.Itoa(c.Process.Pid)), 0o644)
		return 0
	case "sleeper":
		if name := os.Getenv("AMDRUN_TEST_NAME"); name != "" {
			os.WriteFile(filepath.Join(dir, name), nil, 0o644)
		}
		time.Sleep(60 * time.Second)
		return 0
	case "forker":
		// The first half of a double fork: start a sleeper in a session
		// of its own and exit, leaving it to be reparented.
		if _, err := startSleeper(os.Getenv("AMDRUN_TEST_NAME"), true); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "escape":
		// Leave behind what a real job leaves: a child in this process
		// group, one in a session of its own, and a double-forked one;
		// then exit 0.
		if err := escape(rank, dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "shed":
		// Issue 26: a rank that clears its parent-death signal, leaves
		// escapees, SIGKILLs its guard and hangs, to be killed.
		if err := unix.Prctl(unix.PR_SET_PDEATHSIG, 0, 0, 0, 0); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := escape(rank, dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		guard := os.Getppid()
		err := unix.Kill(guard, unix.SIGKILL)
		fmt.Printf("shed: kill %d: %v\n", guard, err)
		return hang(rank, dir)
	case "interrupt":
		// SIGINT handler: rank 1 takes 1.5 s (a checkpoint), rank 0 none;
		// both then write rankN.handled and exit 130.
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT)
		fmt.Println("ready")
		<-ch
		if rank == 1 {
			time.Sleep(1500 * time.Millisecond)
		}
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("rank%d.handled", rank)), nil, 0o644)
		return 130
	case "record":
		// What torch's @record does with an uncaught exception (the
		// failing rank), then noise from an atexit hook.
		if !fail {
			return hang(rank, dir)
		}
		waitPeers(rank, dir)
		rec := `{"message": {"message": "ValueError: loss is nan", "extraInfo": {"py_callstack": ` +
			`"Traceback (most recent call last):\n  File \"train.py\", line 9, in main\n    step()\n` +
			`  File \"train.py\", line 4, in step\n    raise ValueError(\"loss is nan\")\nValueError: loss is nan\n", ` +
			`"timestamp": "1796058334"}}}`
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("rank%d.errfile", rank)), []byte(os.Getenv(EnvErrorFile)), 0o644)
		if err := os.WriteFile(os.Getenv(EnvErrorFile), []byte(rec), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		for i := 0; i < 12; i++ {
			fmt.Fprintf(os.Stderr, "atexit noise %d\n", i)
		}
		return 1
	case "stdin":
		// Copies its standard input to rankN.stdin.
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("rank%d.stdin", rank)), b, 0o644)
		return 0
	case "tty":
		// Says which of its streams are terminals, and whether it leads a
		// session of its own, in rankN.tty; then draws a progress bar
		// and ends it with a newline once DIR/go exists.
		var b strings.Builder
		for fd := 0; fd < 3; fd++ {
			_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
			fmt.Fprintf(&b, "%d:%v ", fd, err == nil)
		}
		sid, _ := unix.Getsid(0)
		fmt.Fprintf(&b, "session-leader:%v", sid == os.Getpid())
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("rank%d.tty", rank)), []byte(b.String()), 0o644)
		os.Stdout.WriteString("\rprogress 1/3")
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
				break
			}
		}
		os.Stdout.WriteString("\rprogress 3/3\n")
		return 0
	case "kbint":
		// What Python prints when Ctrl-C ends a script: a traceback that
		// ends with KeyboardInterrupt, then exit 130.
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT)
		fmt.Println("ready")
		<-ch
		fmt.Fprint(os.Stderr, "Traceback (most recent call last):\n")
		for i := 0; i < 8; i++ {
			fmt.Fprintf(os.Stderr, "  File \"train.py\", line %d, in step\n    loss.backward()\n", 10+i)
		}
		fmt.Fprint(os.Stderr, "KeyboardInterrupt\n")
		return 130
	case "prompt":
		// Rank 0 asks "continue? " without a newline, as input() does,
		// and ends the line with "yes" once DIR/go exists; the others
		// wait for it silently.
		if rank == 0 {
			os.Stdout.WriteString("continue? ")
		}
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
				break
			}
		}
		if rank == 0 {
			os.Stdout.WriteString("yes\n")
		}
		return 0
	case "attempts":
		// Says which attempt it is on stdout and stderr; rank 0 fails
		// the first attempt.
		count := os.Getenv("TORCHELASTIC_RESTART_COUNT")
		fmt.Printf("out of rank %d attempt %s\n", rank, count)
		fmt.Fprintf(os.Stderr, "err of rank %d attempt %s\n", rank, count)
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("attempt%s.rank%d", count, rank)), nil, 0o644)
		if fail && count == "0" {
			// Not before the others have written theirs.
			n, _ := strconv.Atoi(os.Getenv("LOCAL_WORLD_SIZE"))
			for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
				m, _ := filepath.Glob(filepath.Join(dir, "attempt0.rank*"))
				if len(m) == n {
					break
				}
			}
			return 1
		}
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown worker mode", mode)
	return 2
}

// startSleeper starts the test binary as a sleeper that writes DIR/name
// once running; setsid puts it in a session of its own.
func startSleeper(name string, setsid bool) (int, error) {
	c := exec.Command(os.Args[0])
	c.Env = append(withoutEnv(os.Environ(), envWorker), envWorker+"=sleeper", "AMDRUN_TEST_NAME="+name)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
	if err := c.Start(); err != nil {
		return 0, err
	}
	return c.Process.Pid, nil
}

// escape leaves three processes behind, wherever a job's processes go: a
// sleeper in this process group, one in a session of its own, and one
// double-forked (its parent exited); it returns once all three run
// (rankN.escapee{0,1,2} exist).
func escape(rank int, dir string) error {
	names := make([]string, 3)
	for i := range names {
		names[i] = fmt.Sprintf("rank%d.escapee%d", rank, i)
	}
	if _, err := startSleeper(names[0], false); err != nil {
		return err
	}
	if _, err := startSleeper(names[1], true); err != nil {
		return err
	}
	c := exec.Command(os.Args[0])
	c.Env = append(withoutEnv(os.Environ(), envWorker), envWorker+"=forker", "AMDRUN_TEST_NAME="+names[2])
	if err := c.Run(); err != nil {
		return fmt.Errorf("forker: %w", err)
	}
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		n := 0
		for _, name := range names {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				n++
			}
		}
		if n == len(names) {
			return nil
		}
	}
	return errors.New("escapees did not start")
}

// hang announces "ready" once its handlers are in place and waits for a
// signal; on SIGTERM it writes rankN.sigterm and dies of SIGTERM. With
// envEscape=1 it first leaves escapees (see escape).
func hang(rank int, dir string) int {
	if os.Getenv(envEscape) == "1" {
		if err := escape(rank, dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	ignore := os.Getenv(envIgnore)
	if strings.Contains(ignore, "TERM") {
		signal.Ignore(syscall.SIGTERM)
	}
	if strings.Contains(ignore, "INT") {
		signal.Ignore(syscall.SIGINT)
	}
	ch := make(chan os.Signal, 1)
	if !strings.Contains(ignore, "TERM") {
		signal.Notify(ch, syscall.SIGTERM)
	}
	// Side signals leave a rankN.SIGNAME file; SIGURG is left out, the Go
	// runtime sends it to itself.
	side := make(chan os.Signal, 8)
	signal.Notify(side, syscall.SIGUSR1, syscall.SIGCHLD, syscall.SIGWINCH)
	go func() {
		for s := range side {
			os.WriteFile(filepath.Join(dir, fmt.Sprintf("rank%d.%s", rank, unix.SignalName(s.(syscall.Signal)))), nil, 0o644)
		}
	}()
	fmt.Println("ready")
	os.WriteFile(filepath.Join(dir, fmt.Sprintf("rank%d.ready", rank)), nil, 0o644)
	select {
	case <-ch:
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("rank%d.sigterm", rank)), nil, 0o644)
		signal.Reset(syscall.SIGTERM)
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
		time.Sleep(time.Minute)
	case <-time.After(time.Minute):
	}
	return 0
}

// waitPeers waits until every other rank is ready (its handlers are in
// place), so that a failure reaches workers that can report the SIGTERM.
func waitPeers(rank int, dir string) {
	n, _ := strconv.Atoi(os.Getenv("LOCAL_WORLD_SIZE"))
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		ready := 0
		for r := 0; r < n; r++ {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("rank%d.ready", r))); r == rank || err == nil {
				ready++
			}
		}
		if ready == n {
			return
		}
	}
}

// miniLauncher is a whole amdrun in small: it runs two hanging workers
// (one through the bind shim), contained as envContain says, holding the
// file envHold names locked (as a device lease), and prints "pid RANK PID"
// for each.
func miniLauncher(dir string) int {
	self, _ := os.Executable()
	env := append(os.Environ(), envWorker+"=hang", envDir+"="+dir)
	env = withoutEnv(withoutEnv(withoutEnv(env, envLauncher), envContain), envHold)
	cpus, err := allowedNow()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	contain := ContainAuto
	if c := os.Getenv(envContain); c != "" {
		if contain, err = ParseContainment(c); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	var hold []*os.File
	if path := os.Getenv(envHold); path != "" {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err == nil {
			err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		hold = append(hold, f)
	}
	devs := []topology.Device{{Index: 0, NUMANode: 0}, {Index: 1, RuntimeIndex: 1, NUMANode: -1}}
	p, err := plan.NewPlan(plan.Spec{Devices: devs, HostNUMA: []topology.NUMANode{{ID: 0, CPUs: cpus}}, AllowedCPUs: cpus,
		Argv: []string{self}, Env: env, Bind: plan.BindNUMA, Mem: plan.MemNone})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code, err := Run(context.Background(), p, RunOptions{Prefix: true, Self: self, Contain: contain, Hold: hold,
		OnStart: func(rank, pid int) { fmt.Printf("pid %d %d\n", rank, pid) }})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return code
}

func withoutEnv(env []string, key string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// allowedNow is this process's CPU affinity.
func allowedNow() ([]int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, err
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}
