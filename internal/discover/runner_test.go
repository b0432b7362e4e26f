package discover

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

func TestLimitedBuffer(t *testing.T) {
	b := &limitedBuffer{max: 8}
	if n, err := b.Write([]byte("12345")); n != 5 || err != nil {
		t.Fatal(n, err)
	}
	if _, err := b.Write([]byte("6789")); !errors.Is(err, ErrTooLarge) || !b.over || b.buf.String() != "12345" {
		t.Errorf("err %v over %v kept %q", err, b.over, b.buf.String())
	}
	// Truncating: the write succeeds, what fits is kept.
	tb := &limitedBuffer{max: 8, truncate: true}
	for _, w := range []string{"12345", "6789", "0"} {
		if n, err := tb.Write([]byte(w)); n != len(w) || err != nil {
			t.Fatalf("truncating write %q: %d, %v", w, n, err)
		}
	}
	if tb.buf.String() != "12345678" || !tb.over {
		t.Errorf("truncating buffer kept %q (over %v)", tb.buf.String(), tb.over)
	}
}

func TestTimeoutFromEnv(t *testing.T) {
	for v, want := range map[string]time.Duration{"": ToolTimeout, "90s": 90 * time.Second, "-1s": ToolTimeout, "junk": ToolTimeout} {
		if got := TimeoutFromEnv(v); got != want {
			t.Errorf("%q: %v, want %v", v, got, want)
		}
	}
}

// TestRunToolBounds runs real programs: one that prints without end is
// cut at MaxToolOutput, one that hangs is killed at the timeout with its
// stderr kept, a missing one is ErrToolNotFound.
func TestRunToolBounds(t *testing.T) {
	testutil.EndToEnd(t)
	if _, err := exec.LookPath("yes"); err != nil {
		t.Skip("no yes(1)")
	}
	start := time.Now()
	_, err := RunTool(context.Background(), 20*time.Second, "yes")
	if !errors.Is(err, ErrTooLarge) || time.Since(start) > 15*time.Second {
		t.Errorf("endless output: err %v after %v", err, time.Since(start))
	}
	_, err = RunTool(context.Background(), 300*time.Millisecond, "sh", "-c", "echo warming up >&2; sleep 30 & wait")
	var te *topology.ToolError
	if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "timed out after 300ms") || !strings.Contains(te.Stderr, "warming up") {
		t.Errorf("hung tool: %v (stderr %q)", err, te.Stderr)
	}
	if _, err := RunTool(context.Background(), 0, "no-such-tool-amdrun"); !errors.Is(err, topology.ErrToolNotFound) {
		t.Errorf("missing tool: %v", err)
	}
}

// TestRunToolLongStderrStillSucceeds: a tool that succeeds after writing
// more than maxToolStderr of warnings gives its output. Before, the
// stderr limit ended the copy with an error and RunTool reported
// "larger than 64 MiB" for a tool that printed 3 bytes.
func TestRunToolLongStderrStillSucceeds(t *testing.T) {
	testutil.EndToEnd(t)
	script := "i=0; while [ $i -lt 1100 ]; do printf '%1023s\n' warning >&2; i=$((i+1)); done; echo ok"
	out, err := RunTool(context.Background(), 20*time.Second, "sh", "-c", script)
	if err != nil || string(out) != "ok\n" {
		t.Fatalf("RunTool = %q, %v; want \"ok\\n\"", out, err)
	}
	// A failing one still shows the start of its stderr.
	_, err = RunTool(context.Background(), 20*time.Second, "sh", "-c", script+"; echo broken >&2; exit 3")
	var te *topology.ToolError
	if !errors.As(err, &te) || te.ExitCode != 3 || len(te.Stderr) != maxToolStderr || !strings.HasPrefix(strings.TrimSpace(te.Stderr), "warning") {
		t.Errorf("failing tool: %v (exit %d, %d bytes of stderr)", err, te.ExitCode, len(te.Stderr))
	}
}
