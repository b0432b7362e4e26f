package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

// TestRunSummaryShowsRecordedException: a rank that records its exception
// (torch's @record) and then prints 12 lines from an atexit hook is
// summed up with the exception, not the noise (issue 15); the error file
// is per rank and attempt, kept in the log layout, and the private one is
// gone after Run.
func TestRunSummaryShowsRecordedException(t *testing.T) {
	testutil.EndToEnd(t)
	for _, withLogs := range []bool{false, true} {
		t.Run(fmt.Sprintf("log-dir=%v", withLogs), func(t *testing.T) {
			p, dir := workerPlan(t, 2, "record", envFailRank+"=1")
			p.RunID = "rec"
			o := RunOptions{Stdout: newBuf(0), Grace: 5 * time.Second}
			if withLogs {
				o.LogDir = t.TempDir()
			}
			errb := newBuf(0)
			o.Stderr = errb
			code, err := Run(context.Background(), p, o)
			if code != 1 || err != nil {
				t.Fatalf("Run = %d, %v, want 1", code, err)
			}
			sum := errb.String()[strings.Index(errb.String(), "amdrun: "):]
			where := "exception recorded by the rank (TORCHELASTIC_ERROR_FILE):"
			if withLogs {
				kept := filepath.Join(runDir(t, o.LogDir, "rec"), "attempt_0", "1", "error.json")
				where = "exception recorded in " + kept + ":"
				if b, err := os.ReadFile(kept); err != nil || !strings.Contains(string(b), `"ValueError: loss is nan"`) {
					t.Errorf("error.json in the log layout: %q, %v", b, err)
				}
			}
			want := "  rank 1 (local rank 1, device 1, pid %d): exit code 1 at "
			for _, w := range []string{
				"(root cause)\n    " + where + "\n      ValueError: loss is nan\n      traceback, innermost 2 frame(s):\n" +
					"        File \"train.py\", line 9, in main\n          step()\n" +
					"        File \"train.py\", line 4, in step\n          raise ValueError(\"loss is nan\")\n",
				strings.SplitN(want, "%", 2)[0],
			} {
				if !strings.Contains(sum, w) {
					t.Errorf("summary lacks %q:\n%s", w, sum)
				}
			}
			if strings.Contains(sum, "atexit noise") {
				t.Errorf("summary shows stderr lines:\n%s", sum)
			}
			b, _ := os.ReadFile(filepath.Join(dir, "rank1.errfile"))
			if !strings.HasSuffix(string(b), "/attempt_0.rank_1.json") {
				t.Errorf("%s = %q", EnvErrorFile, b)
			}
			if _, err := os.Stat(filepath.Dir(string(b))); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the error file directory is left: %v", err)
			}
		})
	}
}

// TestRunStdinToRankZero: local rank 0 reads amdrun's standard input, the
// others /dev/null.
func TestRunStdinToRankZero(t *testing.T) {
	testutil.EndToEnd(t)
	p, dir := workerPlan(t, 2, "stdin")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w.WriteString("hi\n")
	w.Close()
	code, err := Run(context.Background(), p, RunOptions{Stdout: newBuf(0), Stderr: newBuf(0), Stdin: r, Prefix: true})
	if code != 0 || err != nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	for rank, want := range []string{"hi\n", ""} {
		if b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank%d.stdin", rank))); err != nil || string(b) != want {
			t.Errorf("rank %d read %q, %v; want %q", rank, b, err, want)
		}
	}
}

// screen collects what a terminal's master end reads.
type screen struct {
	buf  syncBuffer
	done chan struct{}
}

func readScreen(m *os.File) *screen {
	s := &screen{done: make(chan struct{})}
	go func() { _, _ = io.Copy(&s.buf, m); close(s.done) }()
	return s
}

// waitFor waits until the screen shows want.
func (s *screen) waitFor(t *testing.T, want string) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if strings.Contains(s.buf.String(), want) {
			return
		}
	}
	t.Fatalf("the terminal never showed %q; it shows %q", want, s.buf.String())
}

// TestRunTerminal: an unprefixed rank whose output goes to no log file
// writes straight to amdrun's terminal (isatty true, a session of its
// own: no job control), and its progress bar shows before any newline
// (issue 15). Through --log-dir, or with prefixes, it writes to amdrun's
// pipes, and the bar still shows before the newline.
func TestRunTerminal(t *testing.T) {
	testutil.EndToEnd(t)
	for _, tc := range []struct {
		name    string
		ranks   int
		prefix  bool
		logs    bool
		want    string // rank 0's report
		bar     string // what the terminal shows before the newline
		withTTY bool   // stdin is the terminal too
	}{
		{"one rank", 1, false, false, "0:true 1:true 2:true session-leader:true", "\rprogress 1/3", true},
		{"one rank, stdin piped", 1, false, false, "0:false 1:true 2:true session-leader:true", "\rprogress 1/3", false},
		{"log-dir", 1, false, true, "0:false 1:false 2:false session-leader:false", "\rprogress 1/3", false},
		{"prefixed", 2, true, false, "0:false 1:false 2:false session-leader:false", "[rank0]: progress 1/3\r", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, tty := testutil.OpenPTY(t)
			scr := readScreen(m)
			p, dir := workerPlan(t, tc.ranks, "tty")
			o := RunOptions{Stdout: tty, Stderr: tty, Prefix: tc.prefix}
			if tc.logs {
				o.LogDir = t.TempDir()
			}
			if tc.withTTY {
				o.Stdin = tty
			}
			type result struct {
				code int
				err  error
			}
			done := make(chan result, 1)
			go func() {
				code, err := Run(context.Background(), p, o)
				done <- result{code, err}
			}()
			scr.waitFor(t, tc.bar)
			if strings.Contains(scr.buf.String(), "progress 3/3") {
				t.Fatal("the bar showed only after the newline")
			}
			os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
			res := <-done
			if res.code != 0 || res.err != nil {
				t.Fatalf("Run = %d, %v", res.code, res.err)
			}
			b, _ := os.ReadFile(filepath.Join(dir, "rank0.tty"))
			if string(b) != tc.want {
				t.Errorf("rank 0: %q, want %q", b, tc.want)
			}
			scr.waitFor(t, "progress 3/3")
		})
	}
}

// TestRunLogLayoutAcrossRestarts: each attempt writes attempt_<k>, and a
// second run with the same run id a directory of its own; nothing is
// truncated or appended to (issue 15).
func TestRunLogLayoutAcrossRestarts(t *testing.T) {
	testutil.EndToEnd(t)
	logs := t.TempDir()
	p, dir := workerPlan(t, 2, "attempts", envFailRank+"=0")
	p.RunID, p.MaxRestarts = "job", 1
	var first string
	for run := 0; run < 2; run++ {
		marks, _ := filepath.Glob(filepath.Join(dir, "attempt*"))
		for _, m := range marks {
			os.Remove(m)
		}
		errb := newBuf(0)
		code, err := Run(context.Background(), p, RunOptions{Stdout: newBuf(0), Stderr: errb, LogDir: logs, Prefix: true})
		if code != 0 || err != nil {
			t.Fatalf("run %d: Run = %d, %v; stderr:\n%s", run, code, err, errb.String())
		}
		dirs, _ := filepath.Glob(filepath.Join(logs, "job_????????"))
		if len(dirs) != run+1 {
			t.Fatalf("after run %d: run directories %v", run, dirs)
		}
		rd := dirs[0]
		if run == 0 {
			first = rd
		} else if rd == first {
			rd = dirs[1]
		}
		for k := 0; k < 2; k++ {
			for rank := 0; rank < 2; rank++ {
				for stream, name := range map[string]string{"out": "stdout.log", "err": "stderr.log"} {
					path := filepath.Join(rd, fmt.Sprintf("attempt_%d", k), strconv.Itoa(rank), name)
					want := fmt.Sprintf("%s of rank %d attempt %d\n", stream, rank, k)
					if b, err := os.ReadFile(path); err != nil || string(b) != want {
						t.Errorf("run %d: %s = %q, %v; want %q", run, path, b, err, want)
					}
				}
			}
		}
		b, _ := os.ReadFile(filepath.Join(rd, "amdrun.log"))
		if !strings.Contains(string(b), "amdrun: 1 of 2 ranks failed") || !strings.Contains(string(b), "restarting the worker group (restart 1 of 1)") {
			t.Errorf("run %d: amdrun.log:\n%s", run, b)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(first, "attempt_0", "0", "stdout.log")); string(b) != "out of rank 0 attempt 0\n" {
		t.Errorf("the second run changed the first's log: %q", b)
	}
}

// TestRunRedirectsAndTee: -r sends a stream to its file only, -t to its
// file and the console, as torchrun; a stream in neither goes to the
// console only. Without a log dir they write to a temporary one that is
// kept and named.
func TestRunRedirectsAndTee(t *testing.T) {
	testutil.EndToEnd(t)
	p, _ := workerPlan(t, 2, "attempts")
	p.RunID = "rt"
	logs := t.TempDir()
	out, errb := newBuf(0), newBuf(0)
	o := RunOptions{Stdout: out, Stderr: errb, LogDir: logs, Prefix: true,
		Redirects: Streams{PerRank: map[int]Std{0: StdOut, 1: StdAll}}, Tee: Streams{PerRank: map[int]Std{1: StdErr}}}
	if code, err := Run(context.Background(), p, o); code != 0 || err != nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	rd := filepath.Join(runDir(t, logs, "rt"), "attempt_0")
	check := func(rank int, name, wantFile string, onConsole bool, console *syncBuffer) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(rd, strconv.Itoa(rank), name))
		if wantFile == "" && !errors.Is(err, os.ErrNotExist) || wantFile != "" && string(b) != wantFile {
			t.Errorf("rank %d %s: %q, %v; want %q", rank, name, b, err, wantFile)
		}
		line := fmt.Sprintf("[rank%d]: %s of rank %d attempt 0\n", rank, name[3:6], rank)
		if strings.Contains(console.String(), line) != onConsole {
			t.Errorf("rank %d %s on the console: %v, want %v", rank, name, !onConsole, onConsole)
		}
	}
	check(0, "stdout.log", "out of rank 0 attempt 0\n", false, out) // -r 0:1
	check(0, "stderr.log", "", true, errb)                          // neither
	check(1, "stdout.log", "out of rank 1 attempt 0\n", false, out) // -r 1:3
	check(1, "stderr.log", "err of rank 1 attempt 0\n", true, errb) // and -t 1:2

	errb = newBuf(0)
	o = RunOptions{Stdout: newBuf(0), Stderr: errb, Tee: Streams{All: StdOut}}
	if code, err := Run(context.Background(), p, o); code != 0 || err != nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	line, _, _ := strings.Cut(errb.String(), "\n")
	kept, ok := strings.CutPrefix(line, "amdrun: the ranks' log files are in ")
	kept, ok2 := strings.CutSuffix(kept, " (-r/-t without --log-dir)")
	if !ok || !ok2 {
		t.Fatalf("first stderr line %q", line)
	}
	defer os.RemoveAll(filepath.Dir(kept))
	if b, err := os.ReadFile(filepath.Join(kept, "attempt_0", "1", "stdout.log")); string(b) != "out of rank 1 attempt 0\n" {
		t.Errorf("kept stdout.log: %q, %v", b, err)
	}
}

// TestRunSummaryNamesDevices: the summary names a rank's devices as the
// plan does: all of a multi-device rank's, "cpu" for a CPU rank (not
// device -1).
func TestRunSummaryNamesDevices(t *testing.T) {
	testutil.EndToEnd(t)
	dir := t.TempDir()
	env := append(os.Environ(), envWorker+"=fail", envDir+"="+dir, envFailRank+"=1", "OMP_NUM_THREADS=1")
	devs := []topology.Device{{Index: 0, NUMANode: -1}, {Index: 1, RuntimeIndex: 1, NUMANode: -1},
		{Index: 6, RuntimeIndex: 6, NUMANode: -1}, {Index: 7, RuntimeIndex: 7, NUMANode: -1}}
	for _, tc := range []struct {
		spec plan.Spec
		want string
	}{
		{plan.Spec{Devices: devs, DevicesPerRank: 2}, "  rank 1 (local rank 1, devices 6,7, pid "},
		{plan.Spec{CPURanks: 2}, "  rank 1 (local rank 1, cpu, pid "},
	} {
		tc.spec.Argv, tc.spec.Env = []string{os.Args[0]}, env
		p, err := plan.NewPlan(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range must(filepath.Glob(filepath.Join(dir, "rank*"))) {
			os.Remove(f)
		}
		errb := newBuf(0)
		if code, err := Run(context.Background(), p, RunOptions{Stdout: newBuf(0), Stderr: errb, Grace: 5 * time.Second}); code != 3 || err != nil {
			t.Fatalf("Run = %d, %v", code, err)
		}
		if !strings.Contains(errb.String(), tc.want) {
			t.Errorf("summary lacks %q:\n%s", tc.want, errb.String())
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
