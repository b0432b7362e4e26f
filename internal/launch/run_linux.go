package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// drainTimeout bounds how long output is still read after a worker has
// exited: a child it left behind may hold the pipe open.
const drainTimeout = 2 * time.Second

// forwarded are the signals Run receives and passes to every worker group.
var forwarded = []os.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2}

// Run starts the plan's workers and supervises them until every one has
// exited and been reaped. Each worker runs in its own process group, dies
// with amdrun (Pdeathsig SIGKILL) and gets exactly its Rank's argv and
// env, with stdin from /dev/null; a bound rank starts through the bind
// shim (Self ShimArg ...).
//
// The first worker that exits non-zero makes Run send SIGTERM to every
// other group and SIGKILL after Grace; a failure summary then goes to
// Stderr, and, while restarts are left, the whole group starts again with
// TORCHELASTIC_RESTART_COUNT one higher. SIGINT, SIGTERM, SIGHUP,
// SIGQUIT, SIGUSR1 and SIGUSR2 are forwarded to every group (no other
// signal, even when Signals delivers it; a signal the process started
// with ignored, as under nohup, stays ignored); the first four also end
// the run (SIGKILL after Grace, no restart; one that comes while a failed
// group is down prevents its restart) and a second SIGINT kills at once.
// Cancelling ctx acts like SIGTERM. Every worker's command is looked up
// before the first one starts.
//
// exitCode is 0 when every worker succeeded, else the first failing
// worker's exit code, or 128+signal for a worker killed by a signal, or
// 128+signal for a run ended by a signal that no worker failed from. err
// is non-nil only when Run itself failed (a worker could not start: code
// 127 when the command is not found, 126 otherwise; a log file could not
// be created) or ctx ended the run (ctx.Err()).
func Run(ctx context.Context, p *Plan, o RunOptions) (exitCode int, err error) {
	if p == nil || len(p.Ranks) == 0 {
		return 1, errors.New("launch: empty plan")
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Grace < 0 {
		o.Grace = 0
	}
	if o.MaxRestarts == 0 {
		o.MaxRestarts = p.MaxRestarts
	}
	for _, r := range p.Ranks {
		if r.Bound() && o.Self == "" {
			if o.Self, err = os.Executable(); err != nil {
				return 1, fmt.Errorf("launch: bind shim: %w", err)
			}
		}
	}
	s := &supervisor{plan: p, o: o, con: &console{}}
	if err := s.openLogs(); err != nil {
		return 1, err
	}
	defer s.closeLogs()
	if o.Signals != nil {
		s.sigs = o.Signals
	} else {
		// Large buffer: signal.Notify drops signals when the channel is
		// full, and a burst (terminal ^C repeated) must not be lost.
		ch := make(chan os.Signal, 128)
		signal.Notify(ch, notified()...)
		defer signal.Stop(ch)
		s.sigs = ch
	}
	for attempt := 0; ; attempt++ {
		code, err := s.attempt(ctx, attempt)
		if err != nil || code == 0 || s.interrupted != 0 || attempt >= o.MaxRestarts {
			return code, err
		}
		// What came while no worker ran (the failed group's summary)
		// decides before a new group starts.
		if err := ctx.Err(); err != nil {
			return code, err
		}
		if s.endingPending() {
			return code, nil
		}
		fmt.Fprintf(o.Stderr, "amdrun: restarting the worker group (restart %d of %d)\n", attempt+1, o.MaxRestarts)
	}
}

// notified are the forwarded signals that are not ignored: a signal the
// process was started with ignored (nohup's SIGHUP) stays ignored, as
// signal.Notify would otherwise install a handler for it.
func notified() []os.Signal {
	var out []os.Signal
	for _, sig := range forwarded {
		if !signal.Ignored(sig) {
			out = append(out, sig)
		}
	}
	return out
}

// supervisor is the state of one Run. Only Run's goroutine touches it,
// except the fields the wait goroutines send over channels.
type supervisor struct {
	plan        *Plan
	o           RunOptions
	con         *console
	sigs        <-chan os.Signal
	logs        []io.WriteCloser // 2 per rank: stdout, stderr; nil without LogDir
	ints        int              // SIGINTs received
	interrupted syscall.Signal   // the first ending signal received, 0 if none
}

// worker is one started rank of an attempt.
type worker struct {
	r       *Rank
	pid     int
	started time.Time
	exited  bool
	at      time.Time
	code    int            // exit code or 128+signal
	sig     syscall.Signal // killing signal, 0 if it exited
	stopped bool           // exited after amdrun began stopping the group
	tail    *tail
	pipes   []*os.File // read ends, for drain deadlines
	pumps   chan struct{}
}

type exitEvent struct {
	w     *worker
	state *os.ProcessState
	at    time.Time
}

// group is one attempt's workers and the shutdown state.
type group struct {
	workers  []*worker
	stopping bool
	killAt   <-chan time.Time
}

// signal sends sig to the process group of every worker still running.
func (g *group) signal(sig syscall.Signal) {
	for _, w := range g.workers {
		if !w.exited {
			// The negative pid reaches the worker's own children too.
			_ = unix.Kill(-w.pid, sig)
		}
	}
}

// stop begins the shutdown: sig now, SIGKILL after grace. Calling it again
// only forwards sig.
func (g *group) stop(sig syscall.Signal, grace time.Duration) {
	g.signal(sig)
	if !g.stopping {
		g.stopping = true
		g.killAt = time.After(grace)
	}
}

func (g *group) running() int {
	n := 0
	for _, w := range g.workers {
		if !w.exited {
			n++
		}
	}
	return n
}

func (s *supervisor) openLogs() error {
	if s.o.LogDir == "" {
		return nil
	}
	if err := os.MkdirAll(s.o.LogDir, 0o755); err != nil {
		return fmt.Errorf("launch: log dir: %w", err)
	}
	for _, r := range s.plan.Ranks {
		for _, ext := range []string{"stdout", "stderr"} {
			f, err := os.Create(filepath.Join(s.o.LogDir, fmt.Sprintf("rank%d.%s", r.Rank, ext)))
			if err != nil {
				s.closeLogs()
				return fmt.Errorf("launch: log dir: %w", err)
			}
			s.logs = append(s.logs, f)
		}
	}
	return nil
}

func (s *supervisor) closeLogs() {
	for _, f := range s.logs {
		_ = f.Close()
	}
	s.logs = nil
}

// attempt runs the group once and returns its exit code.
func (s *supervisor) attempt(ctx context.Context, attempt int) (int, error) {
	g := &group{}
	exits := make(chan exitEvent, len(s.plan.Ranks))
	// Every command is looked up before any worker starts: a missing one
	// is one clear error, not a group started only to be stopped.
	cmds := make([]command, len(s.plan.Ranks))
	for i := range s.plan.Ranks {
		r := &s.plan.Ranks[i]
		env := withEnv(r.Env, "TORCHELASTIC_RESTART_COUNT", strconv.Itoa(attempt))
		path, args, err := s.command(r, env)
		if err != nil {
			return execFailureCode(err), fmt.Errorf("launch: rank %d: %w", r.Rank, err)
		}
		cmds[i] = command{path: path, args: args, env: env}
	}
	var startErr error
	startCode := 0
	for i := range s.plan.Ranks {
		w, err := s.start(&s.plan.Ranks[i], cmds[i], exits)
		if err != nil {
			startErr = fmt.Errorf("launch: rank %d: %w", s.plan.Ranks[i].Rank, err)
			startCode = execFailureCode(err)
			break
		}
		g.workers = append(g.workers, w)
		if s.o.OnStart != nil {
			s.o.OnStart(w.r.Rank, w.pid)
		}
	}
	if startErr != nil {
		g.stop(unix.SIGTERM, s.o.Grace)
	}
	var root *worker
	var first *worker
	done := ctx.Done()
	var ctxErr error
	for g.running() > 0 {
		select {
		case ev := <-exits:
			w := ev.w
			w.exited, w.at = true, ev.at
			// Whatever the rank left in its process group (dataloader
			// workers, a shell's children) goes with it, at once: a group
			// id is not reused while members remain, and pids are handed
			// out cyclically, so the id still names this group now.
			_ = unix.Kill(-w.pid, unix.SIGKILL)
			w.code, w.sig = exitStatus(ev.state)
			// Stopped by amdrun: it died of a signal while the group was
			// being stopped. A rank that exits with a code of its own then
			// failed by itself.
			w.stopped = g.stopping && w.sig != 0
			for _, f := range w.pipes {
				_ = f.SetReadDeadline(time.Now().Add(drainTimeout))
			}
			if w.code != 0 {
				if first == nil {
					first = w
				}
				if root == nil && !g.stopping {
					root = w
				}
				g.stop(unix.SIGTERM, s.o.Grace)
			}
		case sig := <-s.sigs:
			s.onSignal(g, sig)
		case <-done:
			done, ctxErr = nil, ctx.Err()
			g.stop(unix.SIGTERM, s.o.Grace)
		case <-g.killAt:
			g.killAt = nil
			g.signal(unix.SIGKILL)
		}
	}
	for _, w := range g.workers {
		<-w.pumps
	}
	if first != nil {
		s.summary(g, root, attempt)
	}
	switch {
	case startErr != nil:
		return startCode, startErr
	case root != nil:
		return root.code, ctxErr
	case s.interrupted != 0:
		return 128 + int(s.interrupted), ctxErr
	case first != nil:
		return first.code, ctxErr
	}
	return 0, ctxErr
}

// endingPending takes the signals received while no group runs and says
// whether one of them ends the run; the others have no worker to go to.
func (s *supervisor) endingPending() bool {
	for {
		select {
		case sig := <-s.sigs:
			switch ss, _ := sig.(syscall.Signal); ss {
			case unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT:
				if s.interrupted == 0 {
					s.interrupted = ss
				}
				return true
			}
		default:
			return false
		}
	}
}

// onSignal forwards sig to every group; an ending signal stops the run and
// a second SIGINT kills at once.
func (s *supervisor) onSignal(g *group, sig os.Signal) {
	ss, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	switch ss {
	case unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT:
		if s.interrupted == 0 {
			s.interrupted = ss
		}
		if ss == unix.SIGINT {
			s.ints++
			if s.ints > 1 {
				g.stop(unix.SIGKILL, s.o.Grace)
				return
			}
		}
		g.stop(ss, s.o.Grace)
	case unix.SIGUSR1, unix.SIGUSR2:
		g.signal(ss)
	}
	// Anything else (SIGCHLD, SIGURG, SIGWINCH from a caller's catch-all
	// Signals channel) is amdrun's own business, never the workers'.
}

// start starts one rank from a goroutine locked to its OS thread for the
// life of the child: Pdeathsig fires when the thread that forked the
// child exits, not the process (golang/go#27505).
func (s *supervisor) start(r *Rank, c command, exits chan<- exitEvent) (*worker, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd := &exec.Cmd{
		Path:   c.path,
		Args:   c.args,
		Env:    c.env,
		Stdout: outW,
		Stderr: errW,
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,
			Pdeathsig: syscall.SIGKILL,
		},
	}
	w := &worker{r: r, tail: &tail{}, pipes: []*os.File{outR, errR}, pumps: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine, after the
		// child has been reaped.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait() // the status is in ProcessState
		exits <- exitEvent{w: w, state: cmd.ProcessState, at: time.Now()}
	}()
	err = <-started
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, err
	}
	w.pid, w.started = cmd.Process.Pid, time.Now()
	s.pump(w, outR, errR)
	return w, nil
}

// command is how one rank is started.
type command struct {
	path      string
	args, env []string
}

// command is the path and argv that start r: the worker itself, or the
// bind shim around it.
func (s *supervisor) command(r *Rank, env []string) (string, []string, error) {
	if !r.Bound() {
		pathVar, _ := LookupEnv(env, "PATH")
		p, err := lookPath(r.Argv[0], pathVar)
		if err != nil {
			return "", nil, err
		}
		return p, r.Argv, nil
	}
	return s.o.Self, ShimArgv(s.o.Self, r.CPUs, r.Mems, r.MemPolicy, r.Argv), nil
}

// pump starts copying the worker's output; w.pumps closes when both
// streams are done.
func (s *supervisor) pump(w *worker, outR, errR *os.File) {
	show := s.o.RanksFilter == nil
	for _, lr := range s.o.RanksFilter {
		show = show || lr == w.r.LocalRank
	}
	prefix := ""
	if s.o.Prefix {
		prefix = fmt.Sprintf("[rank%d]: ", w.r.Rank)
	}
	mk := func(dst io.Writer, k int, t *tail) *stream {
		st := &stream{con: s.con, prefix: prefix, tail: t}
		if show {
			st.out = dst
		}
		if s.logs != nil {
			st.log = s.logs[2*w.r.LocalRank+k]
		}
		return st
	}
	out, errs := mk(s.o.Stdout, 0, nil), mk(s.o.Stderr, 1, w.tail)
	half := make(chan struct{})
	go func() { out.pump(outR); close(half) }()
	go func() { errs.pump(errR); <-half; close(w.pumps) }()
}

// exitStatus is the shell's view of a wait status: the exit code, or
// 128+signal with the signal.
func exitStatus(ps *os.ProcessState) (int, syscall.Signal) {
	if ps == nil {
		return 1, 0
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), ws.Signal()
	}
	return ps.ExitCode(), 0
}

// summary writes the failed workers of an attempt to Stderr, the root
// cause first.
func (s *supervisor) summary(g *group, root *worker, attempt int) {
	var failed []*worker
	if root != nil {
		failed = append(failed, root)
	}
	for _, w := range g.workers {
		if w.code != 0 && w != root {
			failed = append(failed, w)
		}
	}
	stopped := 0
	for _, w := range failed {
		if w.stopped && w != root {
			stopped++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "amdrun: %d of %d ranks failed", len(failed)-stopped, len(s.plan.Ranks))
	if stopped > 0 {
		fmt.Fprintf(&b, ", %d stopped by amdrun", stopped)
	}
	fmt.Fprintf(&b, " (attempt %d of %d)", attempt+1, s.o.MaxRestarts+1)
	if s.interrupted != 0 {
		fmt.Fprintf(&b, ", stopped by %s", unix.SignalName(s.interrupted))
	}
	b.WriteString("\n")
	for _, w := range failed {
		how := fmt.Sprintf("exit code %d", w.code)
		if w.sig != 0 {
			how = fmt.Sprintf("signal %s (exit code %d)", unix.SignalName(w.sig), w.code)
		}
		note := ""
		switch {
		case w == root:
			note = " (root cause)"
		case w.stopped:
			note = " (stopped by amdrun)"
		}
		fmt.Fprintf(&b, "  rank %d (local rank %d, device %d, pid %d): %s at %s%s\n",
			w.r.Rank, w.r.LocalRank, w.r.Device.Index, w.pid, how, w.at.Format("2006-01-02T15:04:05.000Z07:00"), note)
		if lines := w.tail.get(); len(lines) > 0 {
			fmt.Fprintf(&b, "    last %d stderr line(s):\n", len(lines))
			for _, l := range lines {
				fmt.Fprintf(&b, "      %s\n", l)
			}
		}
	}
	s.con.write(s.o.Stderr, []byte(b.String()))
}
