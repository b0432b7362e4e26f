package launch

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/testutil"
)

// TestRunInterruptSummaryIsQuiet: Ctrl-C (a forwarded SIGINT) ends two
// ranks with Python's KeyboardInterrupt traceback; the summary shows one
// line per rank, not the traceback's last ten lines (issue 23). The
// traceback itself still reached the console.
func TestRunInterruptSummaryIsQuiet(t *testing.T) {
	testutil.EndToEnd(t)
	p, _ := workerPlan(t, 2, "kbint")
	sigs := make(chan os.Signal, 1)
	out, errOut := newBuf(2), newBuf(0)
	done := make(chan int, 1)
	go func() {
		code, _ := Run(context.Background(), p, RunOptions{Stdout: out, Stderr: errOut, Signals: sigs, Prefix: true, Grace: 10 * time.Second})
		done <- code
	}()
	<-out.ready
	sigs <- syscall.SIGINT
	if code := <-done; code != 130 {
		t.Errorf("Run = %d, want 130", code)
	}
	all := errOut.String()
	i := strings.Index(all, "amdrun: ")
	if i < 0 {
		t.Fatalf("no summary in %q", all)
	}
	summary := all[i:]
	if n := strings.Count(summary, "    KeyboardInterrupt (traceback not repeated here)\n"); n != 2 {
		t.Errorf("%d collapsed lines, want one per rank, in:\n%s", n, summary)
	}
	if strings.Contains(summary, "loss.backward()") || strings.Contains(summary, "stderr line(s)") {
		t.Errorf("the summary repeats the traceback:\n%s", summary)
	}
	if !strings.Contains(all[:i], "loss.backward()") {
		t.Errorf("the traceback did not reach the console:\n%s", all)
	}
}

func TestInterruptLine(t *testing.T) {
	for _, tc := range []struct {
		lines []string
		want  string
		ok    bool
	}{
		{[]string{"Traceback (most recent call last):", "  File \"t.py\"", "KeyboardInterrupt"}, "KeyboardInterrupt", true},
		{[]string{"KeyboardInterrupt: stop now", "", "  "}, "KeyboardInterrupt: stop now", true},
		{[]string{"KeyboardInterrupt", "RuntimeError: boom"}, "", false},
		{[]string{"KeyboardInterruptX"}, "", false},
		{nil, "", false},
	} {
		got, ok := interruptLine(tc.lines)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%q: %q, %v; want %q, %v", tc.lines, got, ok, tc.want, tc.ok)
		}
	}
}
