package launch

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/amdrun/amdrun/internal/plan"
)

// exitStatus is a shell's view of a rank's end (code, or 128+signal, and
// the signal), else of its guard's.
func exitStatus(ev exitEvent) (int, syscall.Signal) {
	ws := ev.status
	if !ev.reported {
		if ev.state == nil {
			return 1, 0
		}
		ws = ev.state.Sys().(syscall.WaitStatus) // always, on Linux
	}
	if ws.Signaled() {
		return 128 + int(ws.Signal()), ws.Signal()
	}
	return ws.ExitStatus(), 0
}

// limitHint names the resource limit behind a failed start (issue 26):
// EAGAIN from fork at the process limit, EMFILE at the descriptor limit.
func limitHint(err error) string {
	switch {
	case errors.Is(err, unix.EAGAIN):
		return " (the process limit: ulimit -u)"
	case errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE):
		return " (the open file limit: ulimit -n)"
	}
	return ""
}

// summary writes an attempt's failed workers to Stderr, the root cause
// first; notStarted counts the ranks a failed start left.
func (s *supervisor) summary(g *group, root *worker, attempt, notStarted int) {
	var failed []*worker
	if root != nil {
		failed = append(failed, root)
	}
	stopped := 0
	for _, w := range g.workers {
		if w.code != 0 && w != root {
			failed = append(failed, w)
			if w.stopped {
				stopped++
			}
		}
	}
	var b strings.Builder
	switch n := len(s.plan.Ranks); {
	case s.stall != nil:
		b.WriteString(s.stallLine(attempt))
	case notStarted == 0:
		fmt.Fprintf(&b, "amdrun: %d of %d ranks failed", len(failed)-stopped, n)
	case len(failed) == stopped:
		// Not "0 of 8 ranks failed": the start did (issue 26).
		fmt.Fprintf(&b, "amdrun: %d of %d ranks could not start", notStarted, n)
	default:
		fmt.Fprintf(&b, "amdrun: %d of %d ranks failed, %d could not start", len(failed)-stopped, n, notStarted)
	}
	if stopped > 0 && s.stall == nil {
		fmt.Fprintf(&b, ", %d stopped by amdrun", stopped)
	}
	if s.stall == nil {
		fmt.Fprintf(&b, " (attempt %d of %d)", attempt+1, s.plan.MaxRestarts+1)
	}
	if s.interrupted != 0 {
		fmt.Fprintf(&b, ", stopped by %s", unix.SignalName(s.interrupted))
	}
	b.WriteString("\n")
	for _, w := range failed {
		how := fmt.Sprintf("exit code %d", w.code)
		switch {
		case w.lost != "": // not the guard's signal: the rank was alive (issue 26)
			how = fmt.Sprintf("%s (exit code %d)", w.lost, w.code)
		case w.sig != 0:
			how = fmt.Sprintf("signal %s (exit code %d)", unix.SignalName(w.sig), w.code)
		}
		note := ""
		switch {
		case w == root:
			note = " (root cause)"
		case w.stopped:
			note = " (stopped by amdrun)"
		}
		fmt.Fprintf(&b, "  rank %d (local rank %d, %s, pid %d): %s at %s%s\n",
			w.r.Rank, w.r.LocalRank, devicesOf(w.r), w.pid, how, w.at.Format("2006-01-02T15:04:05.000Z07:00"), note)
		if w.rec != nil { // its own account, not what stderr ends with
			if w.recAt != "" {
				fmt.Fprintf(&b, "    exception recorded in %s:\n", w.recAt)
			} else {
				fmt.Fprintf(&b, "    exception recorded by the rank (%s):\n", EnvErrorFile)
			}
			for _, l := range w.rec.Lines() {
				fmt.Fprintf(&b, "      %s\n", l)
			}
		} else if ki, ok := interruptLine(w.tail.get()); ok && s.interrupted != 0 {
			fmt.Fprintf(&b, "    %s (traceback not repeated here)\n", ki)
		} else if lines := w.tail.get(); len(lines) > 0 {
			fmt.Fprintf(&b, "    last %d stderr line(s):\n", len(lines))
			for _, l := range lines {
				fmt.Fprintf(&b, "      %s\n", l)
			}
		}
	}
	b.WriteString(interpreterHint(failed))
	s.note(b.String())
}

// interpreterHint names the ranks' program when a failed rank's stderr
// ends in Python's words for a missing module or script (issue 22).
func interpreterHint(failed []*worker) string {
	for _, w := range failed {
		for _, l := range w.tail.get() {
			if strings.HasPrefix(l, "ModuleNotFoundError: ") || strings.Contains(l, ": can't open file ") {
				return fmt.Sprintf("  the ranks ran %s, which could not import a module or open the script: pick another interpreter with --python PATH (or $PYTHON_EXEC)\n", w.r.Argv[0])
			}
		}
	}
	return ""
}

// devicesOf names a rank's devices: "device 3", "devices 0,1,6,7" or "cpu".
func devicesOf(r *plan.Rank) string {
	switch len(r.Devices) {
	case 0:
		return r.DeviceLabel()
	case 1:
		return "device " + r.DeviceLabel()
	}
	return "devices " + r.DeviceLabel()
}
