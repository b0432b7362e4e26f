//go:build linux

package launch

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/testutil"
)

// dummyMode is a containment mode only this test declares: one type and
// its registration, as a new mode's file would be. It starts the guards
// from any thread and records what the supervisor asks of it.
type dummyMode struct {
	hold   []*os.File
	mu     sync.Mutex
	guards []int // the guards it started
	lost   []string
	closed bool
}

func (d *dummyMode) guardHeld() []*os.File   { return d.hold }
func (d *dummyMode) outerPID(_, pid int) int { return pid }

func (d *dummyMode) startGuard(cmd *exec.Cmd) (int, error) {
	err := cmd.Start()
	if err == nil {
		d.mu.Lock()
		d.guards = append(d.guards, cmd.Process.Pid)
		d.mu.Unlock()
	}
	return 0, err
}

func (d *dummyMode) guardLost(guard string, live map[int]bool) string {
	d.lost = append(d.lost, guard)
	return guard + "; the dummy mode was told"
}

func (d *dummyMode) close() { d.closed = true }

// registerDummy registers a dummyMode named "dummy" for the test's time;
// auto never chooses it.
func registerDummy(t *testing.T) *dummyMode {
	d := &dummyMode{}
	register(containMode{name: "dummy", open: func(o containOpts) (container, error) { d.hold = o.hold; return d, nil }})
	t.Cleanup(func() { modes = slices.DeleteFunc(modes, func(m containMode) bool { return m.name == "dummy" }) })
	return d
}

// TestAddingAContainmentMode: a mode is one type behind the container
// interface plus its registration. --contain parses its name, and Run
// starts every guard through it, asks it about a guard that died and
// closes it, with no other change; auto never chooses it.
func TestAddingAContainmentMode(t *testing.T) {
	testutil.EndToEnd(t)
	d := registerDummy(t)
	mode, err := ParseContainment("Dummy")
	if mode != "dummy" || err != nil {
		t.Fatalf("ParseContainment(Dummy) = %q, %v", mode, err)
	}
	if c, _ := ProbeContainment(self(t)); c == mode {
		t.Errorf("auto chose %s", c)
	}
	p, _ := workerPlan(t, 2, "pid")
	if code, err := Run(context.Background(), p, RunOptions{Stdout: newBuf(0), Stderr: newBuf(0), Contain: mode}); code != 0 || err != nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	if len(d.guards) != 2 || !d.closed || len(d.lost) != 0 {
		t.Errorf("the mode started %d guards, closed %v, lost %v; want 2, true, none", len(d.guards), d.closed, d.lost)
	}

	// A rank that kills its guard: the summary's line on it is the mode's.
	mark := newMark(t)
	p, _ = workerPlan(t, 1, "shed", envMark+"="+mark)
	errb := newBuf(0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, err := Run(ctx, p, RunOptions{Stdout: newBuf(0), Stderr: errb, Contain: mode})
	for _, pid := range marked(mark) { // the dummy mode kills nothing
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if code == 0 || err != nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	if len(d.lost) != 1 || !strings.Contains(errb.String(), "its guard (pid ") || !strings.Contains(errb.String(), "; the dummy mode was told") {
		t.Errorf("the mode was told of %v; summary:\n%s", d.lost, errb)
	}
}

// TestAutoPassesOverARefusedMode: a mode auto tries first that is not
// permitted here leaves the job to the next one; Run does not fail, and
// ProbeContainment names the next mode with why the first was refused
// (an unprivileged user's auto run failed with the PID namespace's error).
func TestAutoPassesOverARefusedMode(t *testing.T) {
	testutil.EndToEnd(t)
	refused := errors.New("creating a refused namespace is not permitted")
	register(containMode{name: "refused", auto: 100, open: func(containOpts) (container, error) { return nil, refused }})
	t.Cleanup(func() { modes = slices.DeleteFunc(modes, func(m containMode) bool { return m.name == "refused" }) })
	p, _ := workerPlan(t, 1, "pid")
	if code, err := Run(context.Background(), p, RunOptions{Stdout: newBuf(0), Stderr: newBuf(0)}); code != 0 || err != nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	if c, why := ProbeContainment(self(t)); c == "refused" || c == ContainAuto || !errors.Is(why, refused) {
		t.Errorf("ProbeContainment = %s, %v; want the next mode, with why %q", c, why, refused)
	}
}
