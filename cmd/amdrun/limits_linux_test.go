package main_test

// End-to-end tests of resource limits (issue 26, class 7): a limit is
// one line naming it, never a Go stack, and the summary counts right.

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
)

// stackTrace reports whether s holds a Go runtime crash or stack.
func stackTrace(s string) bool {
	for _, m := range []string{"goroutine ", "panic:", "fatal error:", "SIGABRT", "runtime/cgo:"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// TestProcessLimitIsOneLine: a throwaway user's job of 2 ranks under
// ulimit -u from 20 to 64 (RLIMIT_NPROC is per user, so the user is new)
// either runs or ends with one line naming ulimit -u; at 20-60 the
// guards' stacks showed as the ranks' stderr before. Below about 16 the
// Go runtime may fail to start its own threads before amdrun's main runs
// (`fatal error: newosproc`), which no Go program can catch: not tested.
func TestProcessLimitIsOneLine(t *testing.T) {
	testutil.EndToEnd(t)
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("no prlimit (util-linux)")
	}
	u := testutil.NewUser(t)
	env := setEnv(cleanEnv(t, "OMP_NUM_THREADS=1"), "AMDRUN_LEASE_DIR", testutil.SharedDir(t, 0o1777)+"/leases")
	ran := 0
	for _, n := range []int{20, 24, 32, 48, 64} {
		cmd := u.Command("prlimit", fmt.Sprintf("--nproc=%d:%d", n, n), amdrunBin, "--ngpus", "0", "--nproc-per-node", "2", "--no-python", "/bin/true")
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		s := string(out)
		if stackTrace(s) {
			t.Errorf("ulimit -u %d: a Go crash:\n%s", n, s)
			continue
		}
		if err == nil {
			ran++
			continue
		}
		if !strings.Contains(s, "ulimit -u") {
			t.Errorf("ulimit -u %d: %v without naming the limit:\n%s", n, err, s)
		}
	}
	if ran == 0 {
		t.Errorf("no job ran even under ulimit -u 64")
	}
}

// TestOpenFileLimitCountsRanks: under ulimit -n 32 a job of 8 ranks
// cannot start them all; the failure names the limit and the summary
// says how many could not start, not "0 of 8 ranks failed, 2 stopped".
func TestOpenFileLimitCountsRanks(t *testing.T) {
	testutil.EndToEnd(t)
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("no prlimit (util-linux)")
	}
	cmd := exec.Command("prlimit", "--nofile=32:32", amdrunBin, "--ngpus", "0", "--nproc-per-node", "8", "--no-python", "/bin/sleep", "5")
	cmd.Env = cleanEnv(t, "OMP_NUM_THREADS=1")
	out, err := cmd.CombinedOutput()
	s := string(out)
	if err == nil || stackTrace(s) || !strings.Contains(s, "(the open file limit: ulimit -n)") {
		t.Fatalf("under ulimit -n 32: %v, want an error naming ulimit -n:\n%s", err, s)
	}
	if strings.Contains(s, "amdrun: 0 of 8 ranks failed") {
		t.Errorf("the summary calls no rank failed:\n%s", s)
	}
	if strings.Contains(s, "stopped by amdrun") && !strings.Contains(s, " of 8 ranks could not start") {
		t.Errorf("the summary does not count the ranks that could not start:\n%s", s)
	}
}
