package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
)

// TestRestartWaitsForDeviceMemory (issue 33.5): before a restart amdrun
// reads the device's memory in use through nvidia-smi (a fake first on
// PATH) and restarts only when it is back to what it held before the
// failed attempt. Here the failing rank leaves the fake's reply at
// 30000 MiB (1000 before): no restart, one line, the failure's code;
// left within 256 MiB of before, the group restarts.
func TestRestartWaitsForDeviceMemory(t *testing.T) {
	testutil.EndToEnd(t)
	for _, tc := range []struct {
		after   string
		restart bool
	}{{"30000", false}, {"1100", true}} {
		n := newFakeNode(t)
		n.serveNvidia("h200x2-real")
		args := []string{"--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"}
		n.serveText("nvidia-smi", "1000\n", args...)
		reply := filepath.Join(n.dir, "nvidia-smi", fakeKey(args))
		// Attempt 0 moves the reply (the memory its process holds) and fails.
		script := filepath.Join(t.TempDir(), "job.sh")
		body := "#!/bin/sh\n[ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ] || { echo second attempt; exit 0; }\n" +
			"printf '" + tc.after + "\\n' > '" + reply + "'\nexit 3\n"
		if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		r := runAmdrun(t, n.env, "--source", "nvidia-smi", "--ngpus", "1", "--devices", "0", "--max-restarts", "1",
			"--restart-wait", "300ms", "--no-python", script)
		want := "amdrun: not restarting: device 0 holds 30000 MiB (1000 MiB before the attempt) 300ms after the failed attempt ended; ranks started now would run out of memory (--restart-wait 300ms)\n"
		if tc.restart {
			if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "second attempt") || strings.Contains(r.stderr, "not restarting") {
				t.Errorf("memory back at 1100 MiB: exit %d, want a restart and 0\n%s%s", r.code, r.stdout, r.stderr)
			}
			continue
		}
		if r.code != 3 || !strings.Contains(r.stderr, want) || strings.Contains(r.stdout+r.stderr, "second attempt") {
			t.Errorf("memory held: exit %d, want 3 and the line %q, no restart\n%s%s", r.code, want, r.stdout, r.stderr)
		}
	}
}
