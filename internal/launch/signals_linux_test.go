package launch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/testutil"
)

// TestRunForwardsExactlyTheListedSignals: with Forward (torchrun's
// --signals-to-handle SIGTERM,SIGWINCH) a listed signal that amdrun does
// not forward by default (SIGWINCH) reaches the ranks and a default one
// that is not listed (SIGUSR1) does not. SIGUSR1 is sent first: a
// signal is delivered before a higher-numbered one pending with it, and
// the worker records them in order, so once SIGWINCH is recorded a
// forwarded SIGUSR1 would be too.
func TestRunForwardsExactlyTheListedSignals(t *testing.T) {
	testutil.EndToEnd(t)
	p, dir := workerPlan(t, 2, "hang")
	sigs := make(chan os.Signal, 8)
	out := newBuf(2)
	done := goRun(p, RunOptions{Stdout: out, Stderr: newBuf(0), Signals: sigs, Grace: 10 * time.Second,
		Forward: []os.Signal{syscall.SIGTERM, syscall.SIGWINCH}})
	<-out.ready
	sigs <- syscall.SIGUSR1
	sigs <- syscall.SIGWINCH
	for r := 0; r < 2; r++ {
		if err := waitRankSignal(dir, r, "SIGWINCH"); err != nil {
			t.Errorf("rank %d got no SIGWINCH: %v", r, err)
		}
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("rank%d.SIGUSR1", r))); err == nil {
			t.Errorf("rank %d was sent SIGUSR1, which --signals-to-handle did not list", r)
		}
	}
	sigs <- syscall.SIGTERM
	if code := <-done; code != 143 {
		t.Errorf("Run = %d, want 143", code)
	}
}

// TestRunPrefixTemplate: TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE replaces
// "[rankN]: " on the console.
func TestRunPrefixTemplate(t *testing.T) {
	testutil.EndToEnd(t)
	p, _ := workerPlan(t, 2, "ready")
	out := newBuf(0)
	code, err := Run(context.Background(), p, RunOptions{Stdout: out, Stderr: newBuf(0), Prefix: true,
		PrefixTemplate: "<$role_name:${rank}/$local_rank> "})
	if err != nil || code != 0 {
		t.Fatalf("Run = %d, %v", code, err)
	}
	for r := 0; r < 2; r++ {
		want := fmt.Sprintf("<default:%d/%d> ready\n", r, r)
		if !strings.HasPrefix(out.String(), want) && !strings.Contains(out.String(), "\n"+want) {
			t.Errorf("no line starts with %q in:\n%s", want, out.String())
		}
	}
}
