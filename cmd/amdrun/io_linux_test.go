package main_test

// End-to-end tests of what ranks read and write (issue 15): the error
// file torch's @record writes, terminals and standard input, torchrun's
// log layout.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/testutil"
)

// atRecordScript raises from a function decorated with torch's @record in
// rank 1, after rank 0 has started, and prints 12 lines from an atexit
// hook; rank 0 waits to be stopped.
const atRecordScript = `import atexit, os, sys, time
from torch.distributed.elastic.multiprocessing.errors import record

def noisy():
    for i in range(12):
        print(f"atexit noise line {i}", file=sys.stderr)

atexit.register(noisy)

def load(path):
    raise FileNotFoundError(f"no checkpoint at {path}")

@record
def main():
    d = sys.argv[1]
    if os.environ["RANK"] == "0":
        open(os.path.join(d, "ready0"), "w").close()
        time.sleep(60)
    while not os.path.exists(os.path.join(d, "ready0")):
        time.sleep(0.01)
    try:
        load("/ckpt/step100.pt")
    except FileNotFoundError as e:
        raise RuntimeError("cannot resume training") from e

if __name__ == "__main__":
    main()
`

// TestRecordedExceptionIsTheRootCause: with Debian's torch 1.13, the
// summary shows the exception @record wrote to TORCHELASTIC_ERROR_FILE,
// not the 12 lines an atexit hook printed after it (issue 15); with
// --log-dir the file is kept as torchrun keeps it.
func TestRecordedExceptionIsTheRootCause(t *testing.T) {
	testutil.EndToEnd(t)
	py := needTorch(t)
	for _, withLogs := range []bool{false, true} {
		t.Run(fmt.Sprintf("log-dir=%v", withLogs), func(t *testing.T) {
			dir := t.TempDir()
			script := filepath.Join(dir, "train.py")
			os.WriteFile(script, []byte(atRecordScript), 0o644)
			args := []string{"--source", "example", "--ngpus", "2", "--grace", "5s", "--rdzv-id", "rec", "--python", py, script, dir}
			logs := filepath.Join(dir, "logs")
			if withLogs {
				args = append([]string{"--log-dir", logs}, args...)
			}
			env, mark := newMark(t, cleanEnv(t))
			defer killMarked(mark)
			r := runAmdrun(t, env, args...)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
			}
			sum := r.stderr[strings.Index(r.stderr, "amdrun: 1 of 2 ranks failed"):]
			for _, want := range []string{
				"  rank 1 (local rank 1, device 1, pid ",
				"(root cause)\n    exception recorded ",
				"      RuntimeError: cannot resume training\n      traceback, innermost 1 frame(s):\n" +
					`        File "` + script + `", line 24, in main` + "\n" +
					`          raise RuntimeError("cannot resume training") from e` + "\n",
			} {
				if !strings.Contains(sum, want) {
					t.Errorf("summary lacks %q:\n%s", want, sum)
				}
			}
			if strings.Contains(sum, "atexit noise") {
				t.Errorf("the summary shows the atexit noise, not the exception:\n%s", sum)
			}
			if withLogs {
				m, _ := filepath.Glob(filepath.Join(logs, "rec_????????", "attempt_0", "1", "error.json"))
				if len(m) != 1 || !strings.Contains(sum, "exception recorded in "+m[0]+":") {
					t.Errorf("error.json in the log layout: %v\n%s", m, sum)
				}
			}
		})
	}
}

// pty is a pseudo-terminal opened by the test: amdrun runs with it as its
// controlling terminal, in the foreground, as under an interactive shell.
type pty struct {
	master, tty *os.File
	mu          sync.Mutex
	screen      bytes.Buffer
	done        chan struct{}
}

func openPty(t *testing.T) *pty {
	t.Helper()
	m, tty := testutil.OpenPTY(t)
	p := &pty{master: m, tty: tty, done: make(chan struct{})}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := m.Read(b)
			p.mu.Lock()
			p.screen.Write(b[:n])
			p.mu.Unlock()
			if err != nil {
				close(p.done)
				return
			}
		}
	}()
	return p
}

func (p *pty) shown() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.screen.String()
}

// waitFor waits until the terminal shows want.
func (p *pty) waitFor(t *testing.T, want string) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if strings.Contains(p.shown(), want) {
			return
		}
	}
	t.Fatalf("the terminal never showed %q; it shows %q", want, p.shown())
}

// start runs amdrun on the terminal, as its session's leader with the
// terminal as its controlling one (so in its foreground).
func (p *pty) start(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(amdrunBin, args...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = p.tty, p.tty, p.tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// exitCode waits for cmd and returns its exit code.
func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// ttyRank says which of its streams are terminals, draws a progress bar,
// waits for $1/go, ends the bar, then reads a line from its input.
const ttyRank = `[ -t 0 ] && echo "stdin is a terminal"
[ -t 1 ] && echo "stdout is a terminal"
[ -t 2 ] && echo "stderr is a terminal"
printf '\rprogress 1/3'
while [ ! -e "$1/go" ]; do sleep 0.01; done
printf '\rprogress 3/3\n'
if read line; then echo "read: $line"; fi
`

// TestRankGetsTheTerminal: amdrun -n 1 in a terminal (a pty the test
// opens, amdrun in its foreground) hands the rank the terminal: [ -t 1 ]
// holds, a tqdm-like "\r" bar shows before its newline, and the rank
// reads what is typed (no SIGTTIN stops it), in the job's PID namespace
// (as root) or not. With prefixes (-n 2), rank 0 still reads the
// terminal and its bar still shows before the newline, prefixed (issue
// 15).
func TestRankGetsTheTerminal(t *testing.T) {
	testutil.EndToEnd(t)
	for _, tc := range []struct {
		n, contain  string
		bar         string
		outTerminal bool
	}{
		{"1", "auto", "\rprogress 1/3", true},
		{"1", "subreaper", "\rprogress 1/3", true},
		{"2", "auto", "[rank0]: progress 1/3\r", false},
	} {
		t.Run("n="+tc.n+"/contain="+tc.contain, func(t *testing.T) {
			p := openPty(t)
			dir := t.TempDir()
			env, mark := newMark(t, cleanEnv(t))
			defer killMarked(mark)
			cmd := p.start(t, env, "--source", "example", "-n", tc.n, "--contain", tc.contain, "--no-python", "sh", "-c", ttyRank, "sh", dir)
			p.waitFor(t, tc.bar)
			if strings.Contains(p.shown(), "progress 3/3") {
				t.Fatal("the bar showed only with its newline")
			}
			os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
			p.waitFor(t, "progress 3/3")
			p.master.WriteString("typed by hand\n")
			p.waitFor(t, "read: typed by hand")
			if code := exitCode(t, cmd); code != 0 {
				t.Fatalf("exit %d; terminal:\n%s", code, p.shown())
			}
			s := p.shown()
			if !strings.Contains(s, "stdin is a terminal") {
				t.Errorf("rank 0's stdin is not the terminal:\n%s", s)
			}
			for _, stream := range []string{"stdout", "stderr"} {
				if strings.Contains(s, stream+" is a terminal") != tc.outTerminal {
					t.Errorf("%s is a terminal: %v, want %v:\n%s", stream, !tc.outTerminal, tc.outTerminal, s)
				}
			}
		})
	}
}

// TestPdbInARank: breakpoint() in the only rank is a working pdb on the
// terminal.
func TestPdbInARank(t *testing.T) {
	testutil.EndToEnd(t)
	p := openPty(t)
	env, mark := newMark(t, cleanEnv(t))
	defer killMarked(mark)
	script := filepath.Join(t.TempDir(), "debug.py")
	os.WriteFile(script, []byte("x = 27182818\nbreakpoint()\nprint('after', x + 1)\n"), 0o644)
	cmd := p.start(t, env, "--source", "example", "-n", "1", "--python", pythonPath(), script)
	p.waitFor(t, "(Pdb) ")
	p.master.WriteString("p x\n")
	p.waitFor(t, "\n27182818\r\n")
	p.master.WriteString("c\n")
	p.waitFor(t, "after 27182819")
	if code := exitCode(t, cmd); code != 0 {
		t.Fatalf("exit %d; terminal:\n%s", code, p.shown())
	}
}

// TestBackgroundAmdrunLeavesTheTerminalInput: amdrun started in the
// background of its terminal (`amdrun ... &` under an interactive shell's
// job control) hands rank 0 /dev/null, not the terminal whose input is
// the shell's.
func TestBackgroundAmdrunLeavesTheTerminalInput(t *testing.T) {
	testutil.EndToEnd(t)
	p := openPty(t)
	env, mark := newMark(t, cleanEnv(t))
	defer killMarked(mark)
	// bash with job control (set -m) puts the background job in a group
	// of its own, not the terminal's foreground, and leaves its stdin.
	cmd := exec.Command("bash", "-c", `set -m; "$0" "$@" & wait $!`, amdrunBin, "--source", "example", "-n", "1",
		"--no-python", "sh", "-c", `if [ -t 0 ]; then echo "rank stdin: terminal"; else echo "rank stdin: not a terminal"; fi`)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = p.tty, p.tty, p.tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, "rank stdin: ")
	if code := exitCode(t, cmd); code != 0 || !strings.Contains(p.shown(), "rank stdin: not a terminal") {
		t.Errorf("exit %d; terminal:\n%s", code, p.shown())
	}
}

// TestStdinReachesRankZero is `echo hi | amdrun -n 1 --no-python cat`;
// with two ranks only rank 0 reads it, the other reads /dev/null.
func TestStdinReachesRankZero(t *testing.T) {
	testutil.EndToEnd(t)
	for _, tc := range []struct{ n, want string }{{"1", "hi\n"}, {"2", "[rank0]: hi\n"}} {
		cmd := exec.Command(amdrunBin, "--source", "example", "-n", tc.n, "--no-python", "cat")
		cmd.Env = cleanEnv(t)
		cmd.Stdin = strings.NewReader("hi\n")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		done := make(chan error, 1)
		go func() { done <- cmd.Run() }()
		select {
		case err := <-done:
			if err != nil || stdout.String() != tc.want {
				t.Errorf("-n %s: %v, stdout %q, want %q; stderr:\n%s", tc.n, err, stdout.String(), tc.want, stderr.String())
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("-n %s: cat did not end: a rank waits on an input that never closes", tc.n)
		}
	}
}

// attemptsScript prints which attempt it is on stdout and stderr; rank 0
// fails the first attempt once rank 1 has printed.
const attemptsScript = `import os, sys, time
d, rank, k = sys.argv[1], os.environ["LOCAL_RANK"], os.environ["TORCHELASTIC_RESTART_COUNT"]
print(f"out {rank} {k}", flush=True)
print(f"err {rank} {k}", file=sys.stderr, flush=True)
open(os.path.join(d, f"a{k}.{rank}"), "w").close()
if rank == "0" and k == "0":
    while not os.path.exists(os.path.join(d, "a0.1")):
        time.sleep(0.01)
    sys.exit(1)
`

// TestLogDirLayoutAcrossRestartAndRuns: --log-dir writes torchrun's
// layout, a new attempt_<k> per restart and a new run directory per run
// of the same --rdzv-id, nothing truncated; -r keeps a stream off the
// console, -t keeps it on (issue 15).
func TestLogDirLayoutAcrossRestartAndRuns(t *testing.T) {
	testutil.EndToEnd(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "a.py")
	os.WriteFile(script, []byte(attemptsScript), 0o644)
	logs := filepath.Join(dir, "logs")
	for run := 1; run <= 2; run++ {
		for _, m := range must(filepath.Glob(filepath.Join(dir, "a?.?"))) {
			os.Remove(m)
		}
		r := runAmdrun(t, cleanEnv(t), "--source", "example", "-n", "2", "--max-restarts", "1", "--rdzv-id", "job",
			"--log-dir", logs, "-r", "1", "-t", "2", "--python", pythonPath(), script, dir)
		if r.code != 0 {
			t.Fatalf("run %d: exit %d\n%s", run, r.code, r.stderr)
		}
		if strings.Contains(r.stdout, "out ") || !strings.Contains(r.stderr, "[rank1]: err 1 1\n") {
			t.Errorf("run %d: -r 1 left stdout on the console, or stderr off it:\nstdout:\n%s\nstderr:\n%s", run, r.stdout, r.stderr)
		}
		runs := must(filepath.Glob(filepath.Join(logs, "job_????????")))
		if len(runs) != run {
			t.Fatalf("after run %d: run directories %v", run, runs)
		}
		for _, rd := range runs {
			for k := 0; k < 2; k++ {
				for rank := 0; rank < 2; rank++ {
					for name, want := range map[string]string{"stdout.log": "out %d %d\n", "stderr.log": "err %d %d\n"} {
						path := filepath.Join(rd, fmt.Sprintf("attempt_%d", k), strconv.Itoa(rank), name)
						if b, err := os.ReadFile(path); string(b) != fmt.Sprintf(want, rank, k) {
							t.Errorf("run %d: %s = %q, %v", run, path, b, err)
						}
					}
				}
			}
			if b, _ := os.ReadFile(filepath.Join(rd, "amdrun.log")); !strings.Contains(string(b), "restarting the worker group") {
				t.Errorf("run %d: %s/amdrun.log:\n%s", run, rd, b)
			}
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestTopoTerminalAndPipe: on a real terminal (a pseudo-terminal amdrun
// detects itself, iostreams.System) `topo` prints its header and an
// aligned table; piped, the same rows tab-separated under one header
// line. Without the terminal branch both would be the piped form.
func TestTopoTerminalAndPipe(t *testing.T) {
	testutil.EndToEnd(t)
	env := cleanEnv(t)
	p := openPty(t)
	if code := exitCode(t, p.start(t, env, "--source", "example", "topo")); code != 0 {
		t.Fatalf("topo on a terminal: exit %d\n%s", code, p.shown())
	}
	p.waitFor(t, "GPU7  SYS 16*   SYS 16*")
	shown := p.shown()
	if !strings.HasPrefix(shown, "Source: example") || strings.Contains(shown, "\t") || !strings.Contains(shown, "      GPU0      GPU1") {
		t.Errorf("topo on a terminal: want the source line and an aligned table, no tabs:\n%q", shown)
	}
	piped := runAmdrun(t, env, "--source", "example", "topo")
	if !strings.HasPrefix(piped.stdout, "GPU\tGPU0\tGPU1\t") || strings.Contains(piped.stdout, "Source:") {
		t.Errorf("topo piped: want tab-separated rows under one header line:\n%q", piped.stdout)
	}
}
