package main_test

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
)

// TestTimeoutINTKeepsTheGrace: GNU `timeout -s INT` signals amdrun, then
// its own process group, amdrun included: two SIGINTs microseconds apart
// are one request, and every rank's handler (2 s of output) completes
// instead of being SIGKILLed mid-line (issue 31). SIGALRM to timeout is
// its timer running out, sent when the ranks are ready rather than after
// a guessed delay. Whether the two SIGINTs reach amdrun as two is a race
// (the kernel and Go's runtime merge a pending one): three rounds.
func TestTimeoutINTKeepsTheGrace(t *testing.T) {
	testutil.EndToEnd(t)
	tmo, err := exec.LookPath("timeout")
	if err != nil {
		t.Skip("no timeout (GNU coreutils) on PATH")
	}
	for round := 0; round < 3 && !t.Failed(); round++ {
		timeoutINTRound(t, tmo)
	}
}

func timeoutINTRound(t *testing.T, tmo string) {
	dir := t.TempDir()
	script := filepath.Join(dir, "handler.py")
	os.WriteFile(script, []byte(`import signal, sys, time
def on_int(sig, frame):
    for i in range(10):
        print("saving", i, flush=True)
        time.sleep(0.2)
    print("handler done", flush=True)
    sys.exit(130)
signal.signal(signal.SIGINT, on_int)
print("ready", flush=True)
time.sleep(600)
`), 0o644)
	env, mark := newMark(t, cleanEnv(t))
	defer killMarked(mark)
	cmd := exec.Command(tmo, "--preserve-status", "-s", "INT", "1h",
		amdrunBin, "--source", "example", "--ngpus", "2", "--python", pythonPath(), script)
	cmd.Env = env
	stdout, stderr := startReady(t, cmd, 2)
	rest := make(chan string)
	go func() { b, _ := io.ReadAll(stdout); rest <- string(b) }()
	cmd.Process.Signal(syscall.SIGALRM)
	out := <-rest
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("timeout -s INT amdrun: %v, want exit status 130; stderr:\n%s", err, stderr)
	}
	for _, want := range []string{"[rank0]: handler done", "[rank1]: handler done"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q: a handler was cut short; stdout:\n%s\nstderr:\n%s", want, out, stderr)
		}
	}
}
