package launch

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amdrun/amdrun/internal/plan"
)

// start starts one rank's guard and returns once it runs; w.ready then
// gives the rank's pid. logs are its log files (nil: none).
func (s *supervisor) start(r *plan.Rank, env []string, logs [2]*os.File, exits chan<- exitEvent) (*worker, error) {
	logged, console := s.streams(r.LocalRank)
	p, err := s.guardPipes(logged, console)
	if err != nil {
		return nil, err
	}
	cmd := s.guardCmd(r, env, p)
	w := &worker{r: r, tail: &tail{}, pumps: make(chan struct{}), ctl: p.ctlW, ready: make(chan int, 1), pipes: p.reads}
	kept, err := s.mode.startGuard(cmd)
	closeFiles(p.theirs...)
	if err != nil {
		p.closeOurs()
		return nil, err
	}
	if kept == 0 {
		w.guard = cmd.Process.Pid
	}
	go s.watch(w, cmd, kept, p.repR, exits)
	s.pump(w, p.reads, logs, console)
	return w, nil
}

// guardFiles are one guard's pipes: the read ends of its rank's streams
// (nil: the terminal), the child's ends, control, report, and theirs.
type guardFiles struct {
	reads, child [2]*os.File
	ctlR, ctlW   *os.File
	repR, repW   *os.File
	theirs       []*os.File
}

// closeFiles closes fs (a nil *os.File's Close does nothing).
func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

func (p *guardFiles) closeOurs() { closeFiles(p.reads[0], p.reads[1], p.ctlW, p.repR) }

// guardPipes makes a guard's pipes; on error none is left open. A stream
// of an unprefixed rank that only the console takes is the terminal
// itself, when it is one.
func (s *supervisor) guardPipes(logged, console Std) (*guardFiles, error) {
	p := &guardFiles{}
	fail := func(err error) (*guardFiles, error) {
		closeFiles(p.theirs...)
		p.closeOurs()
		return nil, err
	}
	for k := range p.child {
		if t := s.term[k]; t != nil && !s.o.Prefix && console&stdOf(k) != 0 && logged&stdOf(k) == 0 {
			p.child[k] = t
			continue
		}
		pr, pw, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		p.reads[k], p.child[k] = pr, pw
		p.theirs = append(p.theirs, pw)
	}
	var err error
	if p.ctlR, p.ctlW, err = os.Pipe(); err == nil {
		p.repR, p.repW, err = os.Pipe()
	}
	p.theirs = append(p.theirs, p.ctlR, p.repW) // nil when not made
	if err != nil {
		return fail(err)
	}
	return p, nil
}

// guardCmd starts r's guard with the control and report pipes at
// guardCtlFD and guardReportFD, then the held files the mode gives it.
func (s *supervisor) guardCmd(r *plan.Rank, env []string, p *guardFiles) *exec.Cmd {
	cmd := &exec.Cmd{
		Path:       s.o.Self,
		Args:       guardArgv(s.o.Self, r),
		Env:        env,
		Stdout:     p.child[0],
		Stderr:     p.child[1],
		ExtraFiles: append([]*os.File{p.ctlR, p.repW}, s.mode.guardHeld()...),
		// Its own group (kill -9 %1 must leave it), no parent-death
		// signal: it must live on to sweep.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if r.LocalRank == 0 && s.stdin != nil {
		cmd.Stdin = s.stdin
	}
	return cmd
}

// watch follows one started guard (kept: its pid in the job when the
// keeper started it): it learns the rank's pid, acks, waits for the end
// and sends it to exits.
func (s *supervisor) watch(w *worker, cmd *exec.Cmd, kept int, repR *os.File, exits chan<- exitEvent) {
	defer repR.Close()
	rep := bufio.NewReader(repR)
	if kept != 0 {
		w.guard = s.mode.outerPID(0, kept)
	}
	pid := w.guard // until it names the rank
	if m, err := readReport(rep); err == nil && m.Kind == msgPid {
		// Not reaped before the ack: still there to be found.
		if n := s.mode.outerPID(w.guard, m.Pid); n > 0 {
			pid = n
		}
		_, _ = w.ctl.Write([]byte{ctlAck})
	}
	w.ready <- pid
	ev := exitEvent{w: w}
	if kept == 0 {
		_ = cmd.Wait()
		ev.state = cmd.ProcessState
	}
	// A guard reports the rank's end last; EOF (its end) otherwise.
	for m, err := readReport(rep); err == nil; m, err = readReport(rep) {
		if m.Kind == msgStatus {
			ev.status, ev.reported = m.Status, true
		}
	}
	ev.at = time.Now()
	exits <- ev
}

// guardLost has the mode kill the rank of a guard that ended without
// reporting (w.sig: the guard's killing signal); w.lost says what happened.
func (s *supervisor) guardLost(g *group, w *worker) {
	how := "ended without reporting its rank's end"
	if w.sig != 0 {
		how = "was killed by " + unix.SignalName(w.sig)
	}
	live := map[int]bool{}
	for _, o := range g.workers {
		if !o.exited {
			live[o.guard] = true
		}
	}
	w.lost = s.mode.guardLost(fmt.Sprintf("its guard (pid %d) %s", w.guard, how), live)
}
