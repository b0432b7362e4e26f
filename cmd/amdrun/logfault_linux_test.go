package main_test

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
)

// TestLogDirFullIsSaid: --log-dir on a full filesystem (a 64 KiB tmpfs,
// mounted in a mount namespace of the test's own) keeps the job and its
// exit code, says each failed log file once when it fails, and ends by
// saying the logs are incomplete with what each lost (issue 26: stdout.log
// was cut short and stderr.log and amdrun.log left empty without a word).
func TestLogDirFullIsSaid(t *testing.T) {
	testutil.EndToEnd(t)
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare (util-linux)")
	}
	dir := filepath.Join(t.TempDir(), "full")
	// The rank writes 200 kB, more than the filesystem holds, and fails.
	cmd := exec.Command("unshare", "-m", "sh", "-c", `mkdir -p "$1" && mount -t tmpfs -o size=64k tmpfs "$1" && shift && exec "$@"`, "sh", dir,
		amdrunBin, "--ngpus", "0", "--nproc-per-node", "1", "--log-dir", dir, "--no-python",
		"/bin/sh", "-c", `head -c 200000 /dev/zero | tr '\0' x; echo; echo lastwords >&2; exit 3`)
	cmd.Env = cleanEnv(t, "OMP_NUM_THREADS=1")
	var errb strings.Builder
	cmd.Stderr = &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("exit %v, want 3 (the rank's):\n%s", err, errb.String())
	}
	s := errb.String()
	if stackTrace(s) {
		t.Fatalf("a Go crash:\n%s", s)
	}
	for _, f := range []string{"attempt_0/0/stdout.log"} {
		if !strings.Contains(s, f+" failed: no space left on device: the rest of it is lost") {
			t.Errorf("no warning for %s:\n%s", f, s)
		}
		if strings.Count(s, f+" failed") != 1 {
			t.Errorf("%s's fault said %d times, want once:\n%s", f, strings.Count(s, f+" failed"), s)
		}
	}
	last := s[strings.LastIndex(strings.TrimSpace(s), "\n")+1:]
	if !strings.HasPrefix(last, "amdrun: the logs are incomplete: ") || !strings.Contains(last, "attempt_0/0/stdout.log (") || !strings.Contains(last, " bytes lost: no space left on device)") {
		t.Errorf("the last line does not say the logs are incomplete: %q", last)
	}
	if !strings.Contains(s, "1 of 1 ranks failed") || !strings.Contains(s, "lastwords") {
		t.Errorf("the summary is missing:\n%s", s)
	}
}
