//go:build linux

package launch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/envlist"
	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

// syncBuffer is a bytes.Buffer safe for Run's writers and the test.
type syncBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	ready chan struct{} // closed after want "ready" lines
	want  int
	n     int
}

func newBuf(wantReady int) *syncBuffer {
	return &syncBuffer{ready: make(chan struct{}), want: wantReady}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.want > 0 && bytes.HasSuffix(p, []byte("ready\n")) {
		s.n++
		if s.n == s.want {
			close(s.ready)
		}
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// hostNUMA reads this machine's NUMA nodes from sysfs (one node of all
// allowed CPUs when sysfs has none).
func hostNUMA(t *testing.T) []topology.NUMANode {
	t.Helper()
	paths, _ := filepath.Glob("/sys/devices/system/node/node[0-9]*/cpulist")
	var out []topology.NUMANode
	for _, p := range paths {
		var id int
		if _, err := fmt.Sscanf(filepath.Base(filepath.Dir(p)), "node%d", &id); err != nil {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		cpus, err := topology.ParseCPUList(string(b))
		if err != nil {
			t.Fatal(err)
		}
		if len(cpus) > 0 {
			out = append(out, topology.NUMANode{ID: id, CPUs: cpus})
		}
	}
	if len(out) == 0 {
		cpus, _ := allowedNow()
		out = []topology.NUMANode{{ID: 0, CPUs: cpus}}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// workerPlan is a plan of n fake workers in the given mode, unbound.
func workerPlan(t *testing.T, n int, mode string, extraEnv ...string) (*plan.Plan, string) {
	t.Helper()
	dir := t.TempDir()
	devs := make([]topology.Device, n)
	for i := range devs {
		devs[i] = topology.Device{Index: i, RuntimeIndex: i, NUMANode: -1}
	}
	env := append(os.Environ(), envWorker+"="+mode, envDir+"="+dir, "OMP_NUM_THREADS=1")
	p, err := plan.NewPlan(plan.Spec{Devices: devs, Argv: []string{os.Args[0]}, Env: append(env, extraEnv...)})
	if err != nil {
		t.Fatal(err)
	}
	return p, dir
}

// runDir is the one run directory of runID in the log directory base:
// torchrun's <run id>_XXXXXXXX.
func runDir(t *testing.T, base, runID string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(base, runID+"_????????"))
	if len(m) != 1 {
		t.Fatalf("run directories of %s in %s: %v, want one", runID, base, m)
	}
	return m[0]
}

func self(t *testing.T) string {
	t.Helper()
	s, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type pids struct {
	mu sync.Mutex
	m  map[int]int
}

func (p *pids) record(rank, pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[int]int{}
	}
	p.m[rank] = pid
}

func (p *pids) all() map[int]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[int]int{}
	for k, v := range p.m {
		out[k] = v
	}
	return out
}

func assertGone(t *testing.T, pm map[int]int) {
	t.Helper()
	for rank, pid := range pm {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("rank %d (pid %d) still exists after Run: kill 0 = %v", rank, pid, err)
		}
	}
}

func TestRunPassesArgvEnvAndBinds(t *testing.T) {
	testutil.EndToEnd(t)
	host := hostNUMA(t)
	allowed, err := allowedNow()
	if err != nil {
		t.Fatal(err)
	}
	first, last := host[0], host[len(host)-1] // the same node on a one-node host
	t.Logf("host NUMA nodes %v, allowed CPUs %s", host, topology.FormatCPUList(allowed))
	dir := t.TempDir()
	argv := []string{os.Args[0], "a b", `"quoted" 'single'`, "KEY=VAL", "$HOME", "", "--", "ünï"}
	env := append(os.Environ(), envWorker+"=report", envDir+"="+dir, "NCCL_NVLS_ENABLE=0", "WEIRD=a=b c")
	devs := []topology.Device{
		{Index: 0, NUMANode: first.ID}, {Index: 1, RuntimeIndex: 1, NUMANode: first.ID},
		{Index: 3, RuntimeIndex: 3, NUMANode: last.ID},
		{Index: 2, RuntimeIndex: 2, NUMANode: -1}, // unbound: started without the shim
	}
	for _, mem := range []plan.MemPolicy{plan.MemBind, plan.MemPreferred} {
		t.Run(string(mem), func(t *testing.T) {
			p, err := plan.NewPlan(plan.Spec{Devices: devs, HostNUMA: host, AllowedCPUs: allowed, Argv: argv, Env: env,
				VisibleEnv: (*plan.Mask)(nil).Env(devs, topology.VendorAMD), Bind: plan.BindExclusive, Mem: mem})
			if err != nil {
				t.Fatal(err)
			}
			var out, errb syncBuffer
			code, err := Run(context.Background(), p, RunOptions{Stdout: &out, Stderr: &errb, Self: self(t), Grace: time.Second})
			if code != 0 || err != nil {
				t.Fatalf("Run = %d, %v; stderr:\n%s", code, err, errb.String())
			}
			for _, r := range p.Ranks {
				b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank%d.json", r.Rank)))
				if err != nil {
					t.Fatal(err)
				}
				var got report
				if err := json.Unmarshal(b, &got); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got.Args, argv) {
					t.Errorf("rank %d argv %q, want %q", r.Rank, got.Args, argv)
				}
				// The plan's env, the rank's error file (issue 15) and the
				// stacks bootstrap's and flight recorder's variables (issue
				// 33), nothing else.
				errFile := envlist.Get(got.Env, EnvErrorFile)
				want := plan.WithEnv(r.Env, EnvErrorFile, errFile)
				dir := filepath.Dir(errFile)
				want = plan.WithEnv(want, "PYTHONPATH", dir)
				want = plan.WithEnv(want, "AMDRUN_STACKS", dir+"/stacks.0")
				want = plan.WithEnv(want, "AMDRUN_STACKS_SIGNAL", "41")
				want = plan.WithEnv(want, EnvHeartbeat, fmt.Sprintf("%s/heartbeat.0.%d", dir, r.Rank))
				want = plan.WithEnv(want, "AMDRUN_FR", dir+"/fr.0.") // the flight recorder's dumps
				if !reflect.DeepEqual(want, got.Env) {
					t.Errorf("rank %d env differs from the plan:\n got %q\nwant %q", r.Rank, got.Env, r.Env)
				}
				if !strings.HasSuffix(errFile, fmt.Sprintf("/attempt_0.rank_%d.json", r.LocalRank)) {
					t.Errorf("rank %d: %s=%q", r.Rank, EnvErrorFile, errFile)
				}
				wantCPUs := topology.FormatCPUList(allowed)
				wantPol, wantMask := 0, uint64(0) // MPOL_DEFAULT
				if r.Bound() {
					wantCPUs = topology.FormatCPUList(r.CPUs)
					wantPol, wantMask = mpolBind, 1<<uint(r.NUMANode)
					if mem == plan.MemPreferred {
						wantPol = mpolPreferred
					}
				}
				if got.Cpus != wantCPUs {
					t.Errorf("rank %d Cpus_allowed_list %q, want %q", r.Rank, got.Cpus, wantCPUs)
				}
				if got.Policy != wantPol || got.PolicyMask != wantMask {
					t.Errorf("rank %d mempolicy %d mask %#x, want %d %#x", r.Rank, got.Policy, got.PolicyMask, wantPol, wantMask)
				}
			}
			e := envlist.Map(p.Ranks[1].Env)
			if e["NCCL_NVLS_ENABLE"] != "0" || e["WEIRD"] != "a=b c" || e["HIP_VISIBLE_DEVICES"] != "0,1,3,2" || e["LOCAL_RANK"] != "1" {
				t.Errorf("plan env lost something: %v", e)
			}
		})
	}
}

// TestRunSummaryNamesTheInterpreter: a rank that dies of Python's
// ModuleNotFoundError gets a summary naming the program the ranks ran and
// the flag that picks another (issue 22); TestRunFailFast's summary,
// another failure, has no such line.
func TestRunSummaryNamesTheInterpreter(t *testing.T) {
	testutil.EndToEnd(t)
	p, _ := workerPlan(t, 2, "nomodule", envFailRank+"=1")
	var out, errb syncBuffer
	code, err := Run(context.Background(), p, RunOptions{Stdout: &out, Stderr: &errb, Grace: 20 * time.Second})
	if code != 1 || err != nil {
		t.Fatalf("Run = %d, %v, want 1, nil", code, err)
	}
	want := "  the ranks ran " + os.Args[0] + ", which could not import a module or open the script: pick another interpreter with --python PATH (or $PYTHON_EXEC)\n"
	if !strings.Contains(errb.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, errb.String())
	}
}

func TestRunFailFast(t *testing.T) {
	testutil.EndToEnd(t)
	p, dir := workerPlan(t, 3, "fail", envFailRank+"=1")
	var out, errb syncBuffer
	var pm pids
	start := time.Now()
	code, err := Run(context.Background(), p, RunOptions{Stdout: &out, Stderr: &errb, Grace: 20 * time.Second, OnStart: pm.record})
	took := time.Since(start)
	if code != 3 || err != nil {
		t.Fatalf("Run = %d, %v, want 3, nil", code, err)
	}
	if took > 10*time.Second {
		t.Errorf("Run took %v, want well within the 20s grace", took)
	}
	assertGone(t, pm.all())
	for _, r := range []int{0, 2} {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("rank%d.sigterm", r))); err != nil {
			t.Errorf("rank %d got no SIGTERM: %v", r, err)
		}
	}
	sum := errb.String()
	pid1 := pm.all()[1]
	for _, want := range []string{
		"amdrun: 1 of 3 ranks failed, 2 stopped by amdrun (attempt 1 of 1)",
		fmt.Sprintf("  rank 1 (local rank 1, device 1, pid %d): exit code 3 at ", pid1),
		"(root cause)\n    last 10 stderr line(s):\n      rank 1 error line 5\n",
		"      rank 1 error line 14\n",
		"signal SIGTERM (exit code 143) at ",
		"(stopped by amdrun)",
	} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	if strings.Contains(sum, "could not import a module") {
		t.Errorf("summary blames the interpreter for another failure:\n%s", sum)
	}
	if strings.Contains(sum[strings.Index(sum, "amdrun: "):], "error line 4\n") {
		t.Errorf("summary shows more than 10 lines:\n%s", sum)
	}
	if i, j := strings.Index(sum, "(root cause)"), strings.Index(sum, "(stopped by amdrun)"); i > j {
		t.Errorf("root cause not listed first:\n%s", sum)
	}
}

func TestRunGraceThenKill(t *testing.T) {
	testutil.EndToEnd(t)
	p, _ := workerPlan(t, 2, "fail", envFailRank+"=0", envIgnore+"=TERM")
	var errb syncBuffer
	var pm pids
	start := time.Now()
	code, err := Run(context.Background(), p, RunOptions{Stdout: newBuf(0), Stderr: &errb, Grace: 300 * time.Millisecond, OnStart: pm.record})
	if code != 3 || err != nil {
		t.Fatalf("Run = %d, %v, want 3", code, err)
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 10*time.Second {
		t.Errorf("Run took %v, want the 300ms grace and a little", took)
	}
	assertGone(t, pm.all())
	if !strings.Contains(errb.String(), "signal SIGKILL (exit code 137)") {
		t.Errorf("summary lacks the SIGKILL of rank 1:\n%s", errb.String())
	}
}

func TestRunWorkerKilledBySignal(t *testing.T) {
	testutil.EndToEnd(t)
	p, _ := workerPlan(t, 2, "selfkill", envFailRank+"=1")
	var errb syncBuffer
	code, err := Run(context.Background(), p, RunOptions{Stdout: newBuf(0), Stderr: &errb, Grace: 5 * time.Second})
	if code != 128+9 || err != nil {
		t.Fatalf("Run = %d, %v, want 137", code, err)
	}
	if !strings.Contains(errb.String(), "signal SIGKILL (exit code 137) at ") {
		t.Errorf("summary:\n%s", errb.String())
	}
}

// runAndSignal runs p with o (Stdout and Signals set here) until its n
// workers are ready, sends sig and returns Run's exit code.
func runAndSignal(t *testing.T, p *plan.Plan, o RunOptions, n int, sig os.Signal) int {
	t.Helper()
	sigs := make(chan os.Signal, 4)
	out := newBuf(n)
	o.Stdout, o.Signals = out, sigs
	done := make(chan int)
	go func() {
		code, _ := Run(context.Background(), p, o)
		done <- code
	}()
	select {
	case <-out.ready:
	case <-time.After(20 * time.Second):
		t.Fatal("workers never became ready")
	}
	sigs <- sig
	select {
	case code := <-done:
		return code
	case <-time.After(20 * time.Second):
		t.Fatalf("Run did not return after %v", sig)
	}
	return 0
}

func TestRunForwardsSIGTERM(t *testing.T) {
	testutil.EndToEnd(t)
	p, dir := workerPlan(t, 3, "hang")
	var pm pids
	if code := runAndSignal(t, p, RunOptions{Stderr: newBuf(0), Grace: 20 * time.Second, OnStart: pm.record}, 3, syscall.SIGTERM); code != 143 {
		t.Errorf("Run = %d, want 143", code)
	}
	for r := 0; r < 3; r++ {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("rank%d.sigterm", r))); err != nil {
			t.Errorf("rank %d's SIGTERM handler did not run: %v", r, err)
		}
	}
	assertGone(t, pm.all())
}

func TestRunSecondSIGINTKills(t *testing.T) {
	testutil.EndToEnd(t)
	p, _ := workerPlan(t, 2, "hang", envIgnore+"=INT")
	sigs := make(chan os.Signal, 4)
	out := newBuf(2)
	done := make(chan int)
	start := time.Now()
	go func() {
		code, _ := Run(context.Background(), p, RunOptions{Stdout: out, Stderr: newBuf(0), Signals: sigs, Grace: time.Minute})
		done <- code
	}()
	<-out.ready
	// A SIGINT every 250 ms: those within a second of the first are the
	// same request, a later one kills, however late the first was read.
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	sigs <- syscall.SIGINT
	for {
		select {
		case code := <-done:
			if code != 130 {
				t.Errorf("Run = %d, want 130", code)
			}
			if took := time.Since(start); took > 30*time.Second {
				t.Errorf("took %v, the one-minute grace was waited", took)
			}
			return
		case <-tick.C:
			select {
			case sigs <- syscall.SIGINT:
			default:
			}
		case <-deadline:
			t.Fatal("a second SIGINT did not kill the workers")
		}
	}
}

// goRun runs p in the background with o and sends Run's exit code on the
// channel it returns.
func goRun(p *plan.Plan, o RunOptions) <-chan int {
	done := make(chan int, 1)
	go func() {
		code, _ := Run(context.Background(), p, o)
		done <- code
	}()
	return done
}

// TestRunSIGINTPairIsOneRequest: two SIGINTs back to back (GNU timeout -s
// INT signals amdrun, then its process group) are one Ctrl-C: rank 1's
// 1.5 s handler completes instead of being killed (issue 31).
func TestRunSIGINTPairIsOneRequest(t *testing.T) {
	testutil.EndToEnd(t)
	p, dir := workerPlan(t, 2, "interrupt")
	sigs := make(chan os.Signal, 4)
	out := newBuf(2)
	done := goRun(p, RunOptions{Stdout: out, Stderr: newBuf(0), Signals: sigs, Grace: time.Minute})
	<-out.ready
	sigs <- syscall.SIGINT
	sigs <- syscall.SIGINT
	if code := <-done; code != 130 {
		t.Errorf("Run = %d, want 130", code)
	}
	for r := 0; r < 2; r++ {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("rank%d.handled", r))); err != nil {
			t.Errorf("rank %d's SIGINT handler did not complete: %v", r, err)
		}
	}
}

func TestRunContextCancel(t *testing.T) {
	testutil.EndToEnd(t)
	p, _ := workerPlan(t, 2, "hang")
	out := newBuf(2)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-out.ready; cancel() }()
	code, err := Run(ctx, p, RunOptions{Stdout: out, Stderr: newBuf(0), Signals: make(chan os.Signal), Grace: 5 * time.Second})
	if !errors.Is(err, context.Canceled) || code != 143 {
		t.Errorf("Run = %d, %v, want 143, context canceled", code, err)
	}
}

func TestRunRestarts(t *testing.T) {
	testutil.EndToEnd(t)
	p, dir := workerPlan(t, 2, "restart", envFailRank+"=0")
	p.MaxRestarts = 3
	var errb syncBuffer
	code, err := Run(context.Background(), p, RunOptions{Stdout: newBuf(0), Stderr: &errb, Grace: 5 * time.Second})
	if code != 0 || err != nil {
		t.Fatalf("Run = %d, %v, want 0 after 2 restarts; stderr:\n%s", code, err, errb.String())
	}
	for _, f := range []string{"restart0.rank0", "restart1.rank0", "restart2.rank0", "restart2.rank1"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "restart3.rank0")); err == nil {
		t.Error("a fourth attempt ran after success")
	}
	for _, want := range []string{"restarting the worker group (restart 1 of 3)", "restarting the worker group (restart 2 of 3)", "(attempt 2 of 4)"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}

	// Restarts spent: the last failure's code comes back.
	p, dir = workerPlan(t, 1, "restart", envFailRank+"=0", "AMDRUN_TEST_ALWAYS=1")
	p.MaxRestarts = 1
	code, err = Run(context.Background(), p, RunOptions{Stdout: newBuf(0), Stderr: newBuf(0)})
	if code != 1 || err != nil {
		t.Errorf("Run = %d, %v, want 1", code, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "restart1.rank0")); err != nil {
		t.Errorf("no second attempt: %v", err)
	}
}

var lineRE = regexp.MustCompile(`^\[rank(\d)\]: rank (\d) line (\d+) x+$`)

func TestRunOutputPrefixFilterAndLogs(t *testing.T) {
	testutil.EndToEnd(t)
	p, _ := workerPlan(t, 3, "lines")
	var out, errb syncBuffer
	logDir := filepath.Join(t.TempDir(), "logs")
	code, err := Run(context.Background(), p, RunOptions{Stdout: &out, Stderr: &errb, Prefix: true, LogDir: logDir})
	if code != 0 || err != nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	count := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		m := lineRE.FindStringSubmatch(sc.Text())
		if m == nil || m[1] != m[2] {
			t.Fatalf("interleaved or unprefixed line %q", sc.Text())
		}
		count[m[1]]++
	}
	if !reflect.DeepEqual(count, map[string]int{"0": 200, "1": 200, "2": 200}) {
		t.Errorf("lines per rank %v, want 200 each", count)
	}
	// A last line without newline is still prefixed and ended.
	if !strings.Contains(errb.String(), "[rank2]: rank 2 done\n") {
		t.Errorf("stderr %q", errb.String())
	}
	for r := 0; r < 3; r++ {
		dir := filepath.Join(runDir(t, logDir, p.RunID), "attempt_0", strconv.Itoa(r))
		b, err := os.ReadFile(filepath.Join(dir, "stdout.log"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if len(lines) != 200 || !strings.HasPrefix(lines[199], fmt.Sprintf("rank %d line 199 ", r)) {
			t.Errorf("rank %d stdout.log: %d lines, last %q", r, len(lines), lines[len(lines)-1])
		}
		b, _ = os.ReadFile(filepath.Join(dir, "stderr.log"))
		if string(b) != fmt.Sprintf("rank %d done", r) {
			t.Errorf("rank %d stderr.log = %q", r, b)
		}
	}

	out.b.Reset()
	code, err = Run(context.Background(), p, RunOptions{Stdout: &out, Stderr: newBuf(0), RanksFilter: []int{1}})
	if code != 0 || err != nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 200 || !strings.HasPrefix(lines[0], "rank 1 line 0 ") {
		t.Errorf("filtered, unprefixed output: %d lines, first %q", len(lines), lines[0])
	}
}

func TestRunStartFailures(t *testing.T) {
	testutil.EndToEnd(t)
	p, _ := workerPlan(t, 2, "hang")
	p.Ranks[1].Argv = []string{"no-such-amdrun-worker", "x"}
	var pm pids
	code, err := Run(context.Background(), p, RunOptions{Stdout: newBuf(0), Stderr: newBuf(0), Grace: 5 * time.Second, OnStart: pm.record})
	if code != 127 || err == nil || !strings.Contains(err.Error(), "launch: rank 1: no-such-amdrun-worker: executable file not found in PATH") {
		t.Errorf("Run = %d, %v, want 127 and a not-found error", code, err)
	}
	assertGone(t, pm.all())

	// A bound rank's command is looked up before anything starts too.
	p.Ranks[1].CPUs = []int{0}
	var errb syncBuffer
	started := 0
	code, err = Run(context.Background(), p, RunOptions{Stdout: newBuf(0), Stderr: &errb, Grace: 5 * time.Second, Self: self(t),
		OnStart: func(int, int) { started++ }})
	if code != 127 || err == nil || !strings.Contains(err.Error(), "launch: rank 1: no-such-amdrun-worker: executable file not found in PATH") || started != 0 {
		t.Errorf("Run = %d, %v, %d started, want 127, a not-found error and none started; stderr:\n%s", code, err, started, errb.String())
	}

	// A CPU the process may not use fails the bind, clearly.
	p.Ranks[1].Argv = p.Ranks[0].Argv
	p.Ranks[1].CPUs = []int{1023}
	errb.b.Reset()
	code, _ = Run(context.Background(), p, RunOptions{Stdout: newBuf(0), Stderr: &errb, Grace: 5 * time.Second, Self: self(t)})
	if code != 1 || !strings.Contains(errb.String(), "amdrun bind: sched_setaffinity cpus 1023: invalid argument") {
		t.Errorf("Run = %d; stderr:\n%s", code, errb.String())
	}
}

func TestLookPath(t *testing.T) {
	if p, err := lookPath("sh", "/nonexistent:/bin:/usr/bin"); err != nil || !strings.HasSuffix(p, "/sh") {
		t.Errorf("lookPath(sh) = %q, %v", p, err)
	}
	if _, err := lookPath("no-such-amdrun-worker", "/bin"); err == nil || !strings.Contains(err.Error(), "no-such-amdrun-worker: executable file not found in PATH") {
		t.Errorf("lookPath(missing) error %v", err)
	}
}

// BenchmarkLaunch measures the time from Run's start until every rank has
// run user code (printed "ready"), for N unbound and N bound ranks, under
// each containment permitted here; it reports the median. ns/op is the
// whole Run, to the end of the job's clean-up.
func BenchmarkLaunch(b *testing.B) {
	allowed, err := allowedNow()
	if err != nil {
		b.Fatal(err)
	}
	selfPath, _ := os.Executable()
	modes := containModes(b)
	for _, n := range []int{1, 2, 8} {
		for _, mode := range modes {
			for _, bound := range []bool{false, true} {
				name := fmt.Sprintf("N=%d/%s/unbound", n, mode)
				if bound {
					name = fmt.Sprintf("N=%d/%s/bound", n, mode)
				}
				b.Run(name, func(b *testing.B) {
					devs := make([]topology.Device, n)
					for i := range devs {
						devs[i] = topology.Device{Index: i, RuntimeIndex: i, NUMANode: 0}
					}
					bind := plan.BindNone
					if bound {
						bind = plan.BindNUMA
					}
					p, err := plan.NewPlan(plan.Spec{Devices: devs, HostNUMA: []topology.NUMANode{{ID: 0, CPUs: allowed}},
						Argv: []string{selfPath}, Env: append(os.Environ(), envWorker+"=ready"), Bind: bind, Mem: plan.MemBind})
					if err != nil {
						b.Fatal(err)
					}
					var times []time.Duration
					for i := 0; i < b.N; i++ {
						out := newBuf(n)
						start := time.Now()
						readyAt := make(chan time.Duration, 1)
						go func() { <-out.ready; readyAt <- time.Since(start) }()
						code, err := Run(context.Background(), p, RunOptions{Stdout: out, Stderr: newBuf(0), Self: selfPath,
							Signals: make(chan os.Signal), Contain: mode})
						if code != 0 || err != nil {
							b.Fatalf("Run = %d, %v", code, err)
						}
						times = append(times, <-readyAt)
					}
					sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
					b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "ms-median-to-ready")
				})
			}
		}
	}
}

// TestSupervisorForwardsOnlyTheDocumentedSignals proves the negative
// where forwarding happens: what the supervisor writes to each guard's
// control pipe (a byte per signal, in order, which the guard relays to its
// rank). SIGCHLD, SIGURG and SIGWINCH from a catch-all Signals channel
// write nothing; each of ForwardedSignals writes itself, the stopping
// ones to every rank still running, and nothing reaches an exited rank.
// No process runs and nothing waits.
func TestSupervisorForwardsOnlyTheDocumentedSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGCHLD, syscall.SIGURG, syscall.SIGWINCH, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			g := &group{}
			var reads []*os.File
			for i := range 3 {
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				defer w.Close()
				reads = append(reads, r)
				g.workers = append(g.workers, &worker{ctl: w, exited: i == 2})
			}
			s := &supervisor{o: RunOptions{Grace: time.Hour, Forward: DefaultSignals}} // as Run sets a nil Forward
			s.onSignal(g, sig)
			want := slices.Contains(DefaultSignals, os.Signal(sig))
			for i, w := range g.workers {
				w.ctl.Close() // the reader then sees all that was written, then EOF
				got, err := io.ReadAll(reads[i])
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case w.exited && len(got) > 0:
					t.Errorf("exited rank %d was sent %v", i, got)
				case !w.exited && want && !bytes.Equal(got, []byte{byte(sig)}):
					t.Errorf("rank %d was sent %v, want %s alone", i, got, sig)
				case !w.exited && !want && len(got) > 0:
					t.Errorf("rank %d was sent %v for %s, which amdrun does not forward", i, got, sig)
				}
			}
		})
	}
}

// TestRunForwardsOnlyTheDocumentedSignals injects SIGCHLD, SIGURG and
// SIGWINCH (which a caller's signal.Notify(ch) with no list would
// deliver) next to SIGUSR1: only SIGUSR1 reaches the workers.
func TestRunForwardsOnlyTheDocumentedSignals(t *testing.T) {
	testutil.EndToEnd(t)
	p, dir := workerPlan(t, 2, "hang")
	sigs := make(chan os.Signal, 8)
	out := newBuf(2)
	done := goRun(p, RunOptions{Stdout: out, Stderr: newBuf(0), Signals: sigs, Grace: 10 * time.Second})
	<-out.ready
	sigs <- syscall.SIGCHLD
	sigs <- syscall.SIGURG
	sigs <- syscall.SIGWINCH
	sigs <- syscall.SIGUSR1
	for r := 0; r < 2; r++ {
		if err := waitRankSignal(dir, r, "SIGUSR1"); err != nil {
			t.Errorf("rank %d got no SIGUSR1: %v", r, err)
		}
	}
	sigs <- syscall.SIGTERM
	if code := <-done; code != 143 {
		t.Errorf("Run = %d, want 143", code)
	}
	for r := 0; r < 2; r++ {
		for _, name := range []string{"SIGCHLD", "SIGWINCH"} {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("rank%d.%s", r, name))); err == nil {
				t.Errorf("rank %d was sent %s", r, name)
			}
		}
	}
}

// TestRunKeepsIgnoredSIGHUP runs a launcher started the way nohup starts
// it (SIGHUP ignored): a hangup must not stop the workers.
func TestRunKeepsIgnoredSIGHUP(t *testing.T) {
	testutil.EndToEnd(t)
	cmd := exec.Command("/bin/sh", "-c", `trap '' HUP; exec "$0"`, os.Args[0])
	cmd.Env = append(withoutEnv(os.Environ(), envWorker), envLauncher+"="+t.TempDir())
	pm, stderr := startLauncher(t, cmd)
	// The ranks inherit the ignored SIGHUP, through their guards, as
	// nohup means.
	hup := uint64(1) << (syscall.SIGHUP - 1)
	for _, pid := range pm {
		if ign := sigMask(t, pid, "SigIgn"); ign&hup == 0 {
			t.Errorf("rank pid %d does not ignore SIGHUP (SigIgn %x)", pid, ign)
		}
	}
	// The launcher itself neither catches SIGHUP nor stops ignoring it, so
	// the kernel discards a hangup: there is nothing to wait for.
	if ign, cgt := sigMask(t, cmd.Process.Pid, "SigIgn"), sigMask(t, cmd.Process.Pid, "SigCgt"); ign&hup == 0 || cgt&hup != 0 {
		t.Errorf("launcher: SigIgn %x SigCgt %x, want SIGHUP ignored and not caught", ign, cgt)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// A hangup and then a SIGTERM: the run ends by the SIGTERM (143); a
	// hangup it had caught would have ended it first.
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := <-exited
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 143 {
		t.Errorf("launcher after SIGTERM: %v, want exit status 143; stderr:\n%s", err, stderr.String())
	}
}

// sigMask is the mask of line (SigIgn, SigCgt, ...) of /proc/pid/status.
func sigMask(t *testing.T, pid int, line string) uint64 {
	t.Helper()
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(l, line+":"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	t.Fatalf("/proc/%d/status has no %s line", pid, line)
	return 0
}

// TestRunUnprefixedLastLineEnded: without prefixes too, a last line with
// no newline is ended, so the next rank's output starts a line of its own.
func TestRunUnprefixedLastLineEnded(t *testing.T) {
	testutil.EndToEnd(t)
	p, _ := workerPlan(t, 2, "lines")
	errb := newBuf(0)
	code, err := Run(context.Background(), p, RunOptions{Stdout: newBuf(0), Stderr: errb})
	if code != 0 || err != nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	got := strings.Split(errb.String(), "\n")
	sort.Strings(got)
	if want := []string{"", "rank 0 done", "rank 1 done"}; !reflect.DeepEqual(got, want) {
		t.Errorf("stderr lines %q, want %q", got, want)
	}
}

// TestRunMissingCommand: a worker command that does not exist starts no
// worker at all and gives one clear line and 127, whatever the rank.
func TestRunMissingCommand(t *testing.T) {
	testutil.EndToEnd(t)
	for _, argv0 := range []string{"no-such-amdrun-worker", "./no/such/amdrun-worker"} {
		p, _ := workerPlan(t, 3, "hang")
		p.Ranks[2].Argv = []string{argv0, "x"}
		errb := newBuf(0)
		started := 0
		code, err := Run(context.Background(), p, RunOptions{Stdout: newBuf(0), Stderr: errb, Grace: 5 * time.Second,
			OnStart: func(int, int) { started++ }})
		want := "launch: rank 2: no-such-amdrun-worker: executable file not found in PATH"
		if strings.Contains(argv0, "/") {
			want = "launch: rank 2: ./no/such/amdrun-worker: no such file or directory"
		}
		if code != 127 || err == nil || err.Error() != want {
			t.Errorf("%s: Run = %d, %v, want 127, %q", argv0, code, err, want)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: error %v does not wrap fs.ErrNotExist", argv0, err)
		}
		if started != 0 || errb.String() != "" {
			t.Errorf("%s: %d workers started; stderr %q", argv0, started, errb.String())
		}
	}
}

// TestRunLogDirUnusable: a log dir that cannot be made or used fails Run
// before any worker starts, with one line naming the path: a path under
// a file, and a symbolic link (never followed, issue 14).
func TestRunLogDirUnusable(t *testing.T) {
	testutil.EndToEnd(t)
	p, _ := workerPlan(t, 2, "hang")
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, want string }{
		{filepath.Join(file, "logs"), "not a directory"},
		{link, link + " is a symbolic link"},
	} {
		started := 0
		code, err := Run(context.Background(), p, RunOptions{Stdout: newBuf(0), Stderr: newBuf(0), LogDir: tc.dir, Grace: time.Second,
			OnStart: func(int, int) { started++ }})
		if code != 1 || err == nil || !strings.HasPrefix(err.Error(), "launch: log dir: ") || !strings.Contains(err.Error(), tc.want) ||
			strings.Contains(err.Error(), "\n") || started != 0 {
			t.Errorf("%s: Run = %d, %v, %d started; want 1 and one line with %q", tc.dir, code, err, started, tc.want)
		}
	}
}

// hookWriter calls hook with each write before storing it.
type hookWriter struct {
	syncBuffer
	hook func(p []byte)
}

func (h *hookWriter) Write(p []byte) (int, error) {
	h.hook(p)
	return h.syncBuffer.Write(p)
}

// TestRunNoRestartAfterSignal: a SIGTERM that comes while a failed group
// is being summed up (no worker running) ends the run; no new group is
// started just to be stopped.
func TestRunNoRestartAfterSignal(t *testing.T) {
	testutil.EndToEnd(t)
	p, dir := workerPlan(t, 1, "restart", envFailRank+"=0", "AMDRUN_TEST_ALWAYS=1")
	p.MaxRestarts = 2
	sigs := make(chan os.Signal, 4)
	errb := &hookWriter{hook: func(b []byte) {
		if bytes.Contains(b, []byte("ranks failed")) {
			sigs <- syscall.SIGTERM
		}
	}}
	code, err := Run(context.Background(), p, RunOptions{Stdout: newBuf(0), Stderr: errb, Signals: sigs, Grace: 5 * time.Second})
	if code != 1 || err != nil {
		t.Errorf("Run = %d, %v, want the failure's 1", code, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "restart1.rank0")); err == nil || strings.Contains(errb.String(), "restarting") {
		t.Errorf("the group was restarted after SIGTERM; stderr:\n%s", errb.String())
	}

	// A context cancelled while the group was down starts nothing either.
	p, dir = workerPlan(t, 1, "restart", envFailRank+"=0", "AMDRUN_TEST_ALWAYS=1")
	p.MaxRestarts = 2
	ctx, cancel := context.WithCancel(context.Background())
	errb = &hookWriter{hook: func(b []byte) {
		if bytes.Contains(b, []byte("ranks failed")) {
			cancel()
		}
	}}
	code, err = Run(ctx, p, RunOptions{Stdout: newBuf(0), Stderr: errb, Signals: make(chan os.Signal)})
	if code != 1 || !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %d, %v, want 1, context canceled", code, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "restart1.rank0")); err == nil {
		t.Error("the group was restarted after the context was cancelled")
	}
}

// waitRankSignal waits (up to 10 s) for the file the fake worker of rank
// r writes when it receives sig, and returns the last Stat error.
func waitRankSignal(dir string, r int, sig string) error {
	f := filepath.Join(dir, fmt.Sprintf("rank%d.%s", r, sig))
	var err error
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if _, err = os.Stat(f); err == nil {
			return nil
		}
	}
	return err
}

// TestOnSignalSameRequest: what each sequence of signals sends the ranks.
// The same ending signal again within sameRequest is the same request
// (GNU timeout signals amdrun, then its process group): not forwarded
// again; a SIGINT after that kills (issue 31).
func TestOnSignalSameRequest(t *testing.T) {
	type step struct {
		sig   syscall.Signal
		later bool // sameRequest after the step before
	}
	INT, TERM, KILL := syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL
	for _, c := range []struct {
		name  string
		steps []step
		want  []syscall.Signal
	}{
		{"INT pair", []step{{INT, false}, {INT, false}}, []syscall.Signal{INT}},
		{"INT, INT later", []step{{INT, false}, {INT, true}}, []syscall.Signal{INT, KILL}},
		{"INT pair, INT later", []step{{INT, false}, {INT, false}, {INT, true}}, []syscall.Signal{INT, KILL}},
		{"TERM pair", []step{{TERM, false}, {TERM, false}}, []syscall.Signal{TERM}},
		{"TERM, TERM later", []step{{TERM, false}, {TERM, true}}, []syscall.Signal{TERM, TERM}},
		{"USR1 pair", []step{{syscall.SIGUSR1, false}, {syscall.SIGUSR1, false}}, []syscall.Signal{syscall.SIGUSR1, syscall.SIGUSR1}},
	} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		s := &supervisor{o: RunOptions{Grace: time.Minute, Forward: DefaultSignals}}
		g := &group{workers: []*worker{{ctl: w}}}
		for _, st := range c.steps {
			if st.later {
				s.lastEndAt = s.lastEndAt.Add(-2 * sameRequest)
			}
			s.onSignal(g, st.sig)
		}
		w.Close()
		got, _ := io.ReadAll(r)
		r.Close()
		var want []byte
		for _, sig := range c.want {
			want = append(want, ctlSignal(sig))
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the ranks got %v, want %v", c.name, got, want)
		}
	}
}
