package launch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/amdrun/amdrun/internal/envlist"
	"github.com/amdrun/amdrun/internal/plan"
)

// drainTimeout bounds how long output is still read after a worker has
// exited: a child it left behind may hold the pipe open.
const drainTimeout = 2 * time.Second

// Run starts the plan's workers and supervises them until every one has
// exited and been reaped, and every process they started is gone. Each
// worker runs under its guard (see Containment: amdrun re-executed from
// Self, which also binds a bound rank), in its own process group, and
// gets exactly its Rank's argv and env, plus TORCHELASTIC_RESTART_COUNT
// (the attempt) and TORCHELASTIC_ERROR_FILE (a fresh file per rank and
// attempt in a private directory Run removes at the end; a copy goes to
// the log directory). Local rank 0 reads o.Stdin, unless that is the
// terminal amdrun runs in the background of; the others read /dev/null.
// A rank whose output is not prefixed writes straight to Stdout or Stderr
// when that is a terminal and the stream goes to no log file; such a rank
// runs in a session of its own, so that it reads and writes the terminal
// free of job control, while Ctrl-C still reaches amdrun, which forwards
// it. The job is contained as o.Contain says; nothing it starts outlives
// it, even when amdrun is killed with SIGKILL.
//
// The first worker that exits non-zero makes Run send SIGTERM to every
// other group and SIGKILL after Grace; a failure summary then goes to
// Stderr (and to amdrun.log in the log directory): each failed rank with
// the exception it recorded in its error file (torch's @record), else the
// last lines of its stderr. While restarts are left, the
// whole group starts again with TORCHELASTIC_RESTART_COUNT one higher.
// The signals of RunOptions.Forward (by default SIGINT, SIGTERM, SIGHUP,
// SIGQUIT, SIGUSR1 and SIGUSR2) are forwarded to every group (no other
// signal, even when Signals delivers it; a signal
// the process started with ignored, as under nohup, stays ignored); the
// first four also end the run: every rank gets the whole Grace to finish
// its handler before SIGKILL, and a rank that then dies of a signal or
// exits 130, 143 or 128+the signal is counted as stopped, not failed (it
// sends nobody SIGTERM). No restart follows, and one that comes while a
// failed group is down prevents its restart; a second SIGINT kills at
// once. The same ending signal again within a second is the same request
// (GNU timeout signals amdrun, then its process group): not forwarded again. Cancelling ctx acts like SIGTERM. Every worker's command is
// looked up before the first one starts.
//
// A console that goes away (EPIPE on Stdout or Stderr, SIGPIPE) does not
// stop the job: the workers' output is still drained (into LogDir when
// set) and Run keeps supervising to the end. For that, Run makes the
// process catch SIGPIPE from then on (writes to a closed pipe return
// EPIPE instead of killing it).
//
// exitCode is 0 when every worker succeeded, else the first failing
// worker's exit code, or 128+signal for a worker killed by a signal, or
// 128+signal for a run ended by a signal that no worker failed from. err
// is non-nil only when Run itself failed (a worker could not start: code
// 127 when the command is not found, 126 otherwise; a log file could not
// be created; the containment asked for is not permitted) or ctx ended
// the run (ctx.Err()).
func Run(ctx context.Context, p *plan.Plan, o RunOptions) (exitCode int, err error) {
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
	if o.Self == "" {
		if o.Self, err = os.Executable(); err != nil {
			return 1, fmt.Errorf("launch: rank guard: %w", err)
		}
	}
	if err := checkProcessRoom(len(p.Ranks)); err != nil {
		return 1, err
	}
	catchSIGPIPE()
	s := &supervisor{plan: p, o: o, con: &console{}, stdin: handedStdin(o.Stdin),
		term: [2]*os.File{terminal(o.Stdout), terminal(o.Stderr)}}
	for _, r := range p.Ranks {
		if s.showsRank(r.LocalRank) {
			s.shown++
		}
	}
	s.faults = &logFaults{say: func(m string) { s.con.write(s.o.Stderr, []byte(m)) }, quiet: o.Quiet}
	defer s.closeLogs()
	if err := s.openLogs(); err != nil {
		return 1, err
	}
	defer s.faults.summary() // before closeLogs: the last word on the console
	if err := s.errs.writeBootstrap(); err != nil {
		return 1, err
	}
	s.stacks = &stacker{errs: s.errs}
	defer s.serveStacks()()
	if s.o.StallTimeout == StallAuto {
		s.o.StallTimeout = DefaultStallTimeout
		if s.term[0] != nil || s.term[1] != nil {
			s.o.StallTimeout = 0
		}
	}
	if err := s.contain(); err != nil {
		return 1, err
	}
	// After every worker: the keeper empties the namespace of whatever is
	// left and only then lets go of the held files.
	defer s.uncontain()
	if o.Signals != nil {
		s.sigs = o.Signals
	} else {
		// Large buffer: signal.Notify drops signals when the channel is
		// full, and a burst (terminal ^C repeated) must not be lost.
		ch := make(chan os.Signal, 128)
		signal.Notify(ch, notified(o.forward())...)
		defer signal.Stop(ch)
		s.sigs = ch
	}
	return s.attempts(ctx)
}

// catchSIGPIPE makes the process catch SIGPIPE for good, once however
// often Run is called: a write to a closed console, even after Run (a
// warning, an error line), then fails with EPIPE instead of turning the
// job's exit code into 141.
var catchSIGPIPE = sync.OnceFunc(func() { signal.Notify(make(chan os.Signal, 1), unix.SIGPIPE) })

// terminal returns w when it is a terminal, else nil.
func terminal(w io.Writer) *os.File {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return nil
	}
	if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err != nil {
		return nil
	}
	return f
}

// handedStdin is the standard input local rank 0 gets: f, unless f is
// amdrun's controlling terminal and amdrun runs in the background of it
// (`amdrun ... &`): reading it there would take the shell's input (the
// rank has a session of its own, out of the terminal's job control), so
// the rank reads /dev/null (nil) instead.
func handedStdin(f *os.File) *os.File {
	if f == nil {
		return nil
	}
	fg, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	if err != nil {
		return f // not a terminal, or not amdrun's controlling one
	}
	if fg != unix.Getpgrp() {
		return nil
	}
	return f
}

// contain sets up the containment o.Contain asks for (see Containment):
// the keeper of the job's namespaces when permitted (or required): PID
// and mount namespaces as root, a user namespace too where the kernel
// permits one; else amdrun as a subreaper for the guards.
func (s *supervisor) contain() error {
	switch s.o.Contain {
	case ContainAuto, ContainPIDNamespace:
		k, err := startKeeper(s.o.Self, s.o.Hold, s.errs.dir, false)
		if err == nil {
			s.keeper, s.mode = k, ContainPIDNamespace
			return nil
		}
		if s.o.Contain == ContainPIDNamespace {
			return fmt.Errorf("launch: %w: %w", ErrContainment, err)
		}
		if s.userNamespace() == nil {
			return nil
		}
		return s.subreaper()
	case ContainUserNamespace:
		if err := s.userNamespace(); err != nil {
			return fmt.Errorf("launch: %w: %w", ErrContainment, err)
		}
		return nil
	case ContainSubreaper:
		return s.subreaper()
	}
	return fmt.Errorf("launch: unknown containment %q", string(s.o.Contain))
}

// userNamespace starts the keeper of a user, PID and mount namespace for
// the job (ContainUserNamespace).
func (s *supervisor) userNamespace() error {
	k, err := startKeeper(s.o.Self, s.o.Hold, s.errs.dir, true)
	if err != nil {
		return err
	}
	s.keeper, s.mode = k, ContainUserNamespace
	return nil
}

// subreaper chooses ContainSubreaper: amdrun becomes a child subreaper
// for the job's run, so that a rank whose guard dies comes to amdrun, to
// be killed (sweepOrphans). The children amdrun has now are not the
// job's.
func (s *supervisor) subreaper() error {
	s.mode = ContainSubreaper
	s.guardsOnly()
	was, err := isSubreaper()
	if err != nil {
		return nil // the guards alone, as before issue 26
	}
	if !was {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return nil
		}
		s.unsetSubreaper = true
	}
	s.reaping = true
	s.notJob = map[int]bool{}
	for _, c := range childrenNow(os.Getpid()) {
		s.notJob[c] = true
	}
	return nil
}

// guardsOnly is what amdrun does when the guards alone contain the job:
// it makes itself not dumpable, so that no rank can ptrace it or copy its
// lease descriptors with pidfd_getfd (issue 36.4), and, when it holds
// device leases (other users' jobs may wait for them), says in one line
// what a job can still do.
func (s *supervisor) guardsOnly() {
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	if len(s.o.Hold) == 0 {
		return
	}
	why := "no user namespace here"
	if s.o.Contain == ContainSubreaper {
		why = "--contain subreaper"
	}
	s.note(fmt.Sprintf(guardsOnlyNotice, why))
}

// guardsOnlyNotice is guardsOnly's line, with why (docs/shared-nodes.md
// quotes it).
const guardsOnlyNotice = "amdrun: warning: only the guards contain this job (%s): a rank that kills both its guard and amdrun, or stops amdrun and kills its guard, lives on after the lease is let go; root can permit user namespaces (see amdrun doctor)\n"

// isSubreaper says whether this process is a child subreaper already.
func isSubreaper() (bool, error) {
	var v int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0); err != nil {
		return false, err
	}
	return v != 0, nil
}

// uncontain ends the containment: it waits until the job's namespace is
// empty, or, as the subreaper, kills and reaps whatever of the job came to
// amdrun. Only then does Run return and the caller let the lease go.
func (s *supervisor) uncontain() {
	if s.keeper != nil {
		s.keeper.close()
	}
	if s.reaping {
		s.sweepOrphans(nil)
		if s.unsetSubreaper {
			_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
		}
	}
}

// sweepOrphans kills, as the subreaper, every process that came to amdrun
// from a guard that died (amdrun's children but the guards in live and
// those it had before the job) and everything they started, round after
// round until none is left, and reaps them. It returns how many it
// killed.
func (s *supervisor) sweepOrphans(live map[int]bool) int {
	killed := map[int]bool{}
	for {
		var orphans []int
		for _, c := range childrenNow(os.Getpid()) {
			if !live[c] && !s.notJob[c] {
				orphans = append(orphans, c)
			}
		}
		if len(orphans) == 0 {
			return len(killed)
		}
		for _, o := range orphans {
			for _, d := range descendants(o) {
				killed[d] = true
				_ = unix.Kill(d, unix.SIGKILL)
			}
			killed[o] = true
			_ = unix.Kill(o, unix.SIGKILL)
		}
		for _, o := range orphans {
			// Its own pid: the guards' exec.Cmds wait for theirs.
			var ws unix.WaitStatus
			for {
				if _, err := unix.Wait4(o, &ws, 0, nil); err != unix.EINTR {
					break
				}
			}
		}
	}
}

// notified are the forwarded signals that are not ignored: a signal the
// process was started with ignored (nohup's SIGHUP) stays ignored, as
// signal.Notify would otherwise install a handler for it.
func notified(forwarded []os.Signal) []os.Signal {
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
	plan           *plan.Plan
	o              RunOptions
	con            *console
	sigs           <-chan os.Signal
	job            *jobDir        // the run's log directory; nil without logs
	errs           *errorDir      // the ranks' error files
	notes          io.WriteCloser // amdrun.log in the run's log directory; nil without logs
	faults         *logFaults     // the log files whose writes failed
	keeper         *keeper        // the job's PID namespace; nil: none
	mode           Containment    // the containment chosen (not ContainAuto)
	reaping        bool           // amdrun is the job's subreaper (ContainSubreaper)
	unsetSubreaper bool           // it was not one before
	notJob         map[int]bool   // amdrun's children from before the job (ContainSubreaper)
	stdin          *os.File       // local rank 0's standard input; nil: /dev/null
	term           [2]*os.File    // Stdout, Stderr when they are terminals
	shown          int            // how many ranks the console shows
	lastEnd        syscall.Signal // the last ending signal forwarded, at lastEndAt
	lastEndAt      time.Time
	sawINT         bool           // a SIGINT was forwarded
	interrupted    syscall.Signal // the first ending signal received, 0 if none
	stacks         *stacker       // asks the ranks for their stacks
	activity       atomic.Int64   // when a rank last wrote output (unix nanoseconds)
	stall          *stallReport   // the stall that ended this attempt; nil: none
	stallFiles     int            // stall reports written to the log directory
}

// worker is one started rank of an attempt.
type worker struct {
	r       *plan.Rank
	pid     int // the rank's pid as amdrun sees it (its guard's if unknown)
	started time.Time
	exited  bool
	at      time.Time
	code    int            // exit code or 128+signal
	sig     syscall.Signal // killing signal, 0 if it exited
	stopped bool           // ended by the stop amdrun began (endedByStop)
	tail    *tail
	rec     *RankError // what it recorded in its error file; nil if nothing
	recAt   string     // where that file is kept; "" when nowhere
	pipes   []*os.File // read ends, for drain deadlines
	pumps   chan struct{}
	// ctl is the guard's control pipe: a signal number sends that signal
	// to the rank's process group.
	ctl   *os.File
	ready chan int // the rank's pid, once its guard reported it
	guard int      // the guard's pid
	// lost is set when the guard ended without reporting its rank's end
	// (it was killed): how it ended, and what amdrun did about the rank.
	lost string
}

type exitEvent struct {
	w     *worker
	state *os.ProcessState // the guard's
	// status is the rank's own, as its guard reported it; valid when
	// reported is set (a guard that died without reporting has none).
	status   syscall.WaitStatus
	reported bool
	at       time.Time
}

// group is one attempt's workers and the shutdown state.
type group struct {
	workers  []*worker
	stopping bool
	killAt   <-chan time.Time
	attempt  int
	stalls   chan stallReport // the stall watch's reports; nil: no watch
}

// signal sends sig to the process group of every worker still running,
// through its guard: the guard knows when the rank is gone, so a group id
// that is no longer the rank's is never signalled.
func (g *group) signal(sig syscall.Signal) {
	for _, w := range g.workers {
		if !w.exited {
			_, _ = w.ctl.Write([]byte{ctlSignal(sig)})
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

// openLogs makes the ranks' error file directory and, when there are
// logs (--log-dir; -r or -t without it write to a fresh temporary
// directory that is kept, as torchrun's), the run's log directory with
// amdrun.log.
func (s *supervisor) openLogs() error {
	var err error
	if s.errs, err = newErrorDir(); err != nil {
		return err
	}
	base := s.o.LogDir
	if base == "" && (!s.o.Redirects.IsZero() || !s.o.Tee.IsZero()) {
		if base, err = os.MkdirTemp("", "amdrun-logs-"); err != nil {
			return fmt.Errorf("launch: log dir: %w", err)
		}
	}
	if base == "" {
		return nil
	}
	if s.job, err = openJobDir(base, s.plan.RunID); err != nil {
		return err
	}
	f, err := s.job.create("amdrun.log")
	if err != nil {
		return err
	}
	s.notes = s.faults.wrap(f)
	if s.o.LogDir == "" {
		s.note(fmt.Sprintf("amdrun: the ranks' log files are in %s (-r/-t without --log-dir)\n", s.job.path))
	}
	return nil
}

func (s *supervisor) closeLogs() {
	if s.notes != nil {
		_ = s.notes.Close()
		s.notes = nil
	}
	if s.job != nil {
		s.job.close()
		s.job = nil
	}
	if s.errs != nil {
		s.errs.remove()
		s.errs = nil
	}
}

// streams says which streams of local rank lr go to its log files, and
// which to the console: torchrun's -r (log only) and -t (log and
// console); without either, --log-dir keeps every stream in its file and
// on the console. A stream in no log goes to the console alone, unless
// RanksFilter leaves the rank out.
func (s *supervisor) streams(lr int) (logged, console Std) {
	console = StdAll
	if s.job != nil {
		red, tee := s.o.Redirects.For(lr), s.o.Tee.For(lr)
		if s.o.Redirects.IsZero() && s.o.Tee.IsZero() {
			tee = StdAll
		}
		logged = red | tee
		console = StdAll &^ (red &^ tee)
	}
	if !s.showsRank(lr) {
		console = StdNone
	}
	return logged, console
}

// showsRank says whether RanksFilter lets local rank lr reach the console.
func (s *supervisor) showsRank(lr int) bool {
	if s.o.RanksFilter == nil {
		return true
	}
	return slices.Contains(s.o.RanksFilter, lr)
}

// note writes one of amdrun's own messages (a restart, a failure summary)
// to Stderr and to LogDir/amdrun.log: the log keeps it when the console
// is gone.
func (s *supervisor) note(msg string) {
	s.con.write(s.o.Stderr, []byte(msg))
	if s.notes != nil {
		_, _ = io.WriteString(s.notes, msg)
	}
}

// attempt runs the group once and returns its exit code.
func (s *supervisor) attempt(ctx context.Context, attempt int) (int, error) {
	cmds, code, err := s.commands(attempt)
	if err != nil {
		return code, err
	}
	ad, logs, closeLogs, err := s.attemptLogs(attempt)
	defer closeLogs()
	if err != nil {
		return 1, err
	}
	g := &group{attempt: attempt}
	s.stall = nil
	exits := make(chan exitEvent, len(s.plan.Ranks))
	startCode, startErr := s.startGroup(g, cmds, logs, exits)
	s.stacks.begin(attempt, g)
	if s.o.StallTimeout > 0 && startErr == nil {
		stop := make(chan struct{})
		g.stalls = make(chan stallReport)
		go s.watchStalls(stop, g.stalls)
		defer close(stop)
	}
	root, first, ctxErr := s.supervise(ctx, g, exits)
	for _, w := range g.workers {
		<-w.pumps
		s.collect(w, attempt, ad)
	}
	if first != nil {
		s.summary(g, root, attempt, len(s.plan.Ranks)-len(g.workers))
		if fr := s.flightRecord(attempt); fr != "" && s.stall == nil { // a stall's report has it
			s.note("amdrun: " + fr + "\n")
		}
	}
	switch {
	case startErr != nil:
		return startCode, startErr
	case s.stall != nil:
		return StalledExitCode, ctxErr
	case root != nil:
		return root.code, ctxErr
	case s.interrupted != 0:
		return 128 + int(s.interrupted), ctxErr
	case first != nil:
		return first.code, ctxErr
	}
	return 0, ctxErr
}

// commands are the guards' commands of attempt, one per rank. Every
// command is looked up before any worker starts: a missing one is one
// clear error (with the shell's exit code), not a group started only to
// be stopped.
func (s *supervisor) commands(attempt int) ([]command, int, error) {
	cmds := make([]command, len(s.plan.Ranks))
	for i := range s.plan.Ranks {
		r := &s.plan.Ranks[i]
		env := plan.WithEnv(r.Env, "TORCHELASTIC_RESTART_COUNT", strconv.Itoa(attempt))
		env = plan.WithEnv(env, EnvErrorFile, s.errs.path(attempt, r.LocalRank))
		env = s.errs.frEnv(s.errs.stackEnv(env, attempt, r.Rank), attempt)
		if err := s.lookup(r, env); err != nil {
			return nil, execFailureCode(err), fmt.Errorf("launch: rank %d: %w", r.Rank, err)
		}
		cmds[i] = command{path: s.o.Self, args: guardArgv(s.o.Self, r, s.holdCount()), env: env}
	}
	return cmds, 0, nil
}

// attemptLogs makes attempt's log directory and each rank's log files (the
// streams that go to files), so that one that cannot be made fails the
// attempt before anything runs. Without a log layout all are nil. done
// closes them; it is set even on error.
func (s *supervisor) attemptLogs(attempt int) (ad *attemptDir, logs [][2]*os.File, done func(), err error) {
	logs = make([][2]*os.File, len(s.plan.Ranks))
	done = func() {}
	if s.job == nil {
		return nil, logs, done, nil
	}
	lrs := make([]int, len(s.plan.Ranks))
	for i, r := range s.plan.Ranks {
		lrs[i] = r.LocalRank
	}
	if ad, err = s.job.attempt(attempt, lrs); err != nil {
		return nil, logs, done, err
	}
	done = func() {
		for _, l := range logs {
			for _, f := range l {
				if f != nil {
					f.Close()
				}
			}
		}
		ad.close()
	}
	for i, r := range s.plan.Ranks {
		logged, _ := s.streams(r.LocalRank)
		for k, name := range []string{"stdout.log", "stderr.log"} {
			if logged&stdOf(k) != 0 {
				if logs[i][k], err = ad.create(r.LocalRank, name); err != nil {
					return ad, logs, done, err
				}
			}
		}
	}
	return ad, logs, done, nil
}

// startGroup starts every rank's guard into g and waits for each to
// report its rank's pid (the guards start their ranks in parallel). A
// rank that cannot start stops the ones started; its error and exit code
// are returned.
func (s *supervisor) startGroup(g *group, cmds []command, logs [][2]*os.File, exits chan exitEvent) (int, error) {
	var startErr error
	startCode := 0
	for i := range s.plan.Ranks {
		w, err := s.start(&s.plan.Ranks[i], cmds[i], logs[i], exits)
		if err != nil {
			startErr = fmt.Errorf("launch: rank %d: %w%s", s.plan.Ranks[i].Rank, err, limitHint(err))
			startCode = execFailureCode(err)
			break
		}
		g.workers = append(g.workers, w)
	}
	for _, w := range g.workers {
		w.pid = <-w.ready
		if s.o.OnStart != nil {
			s.o.OnStart(w.r.Rank, w.pid)
		}
	}
	if startErr != nil {
		g.stop(unix.SIGTERM, s.o.Grace)
	}
	return startCode, startErr
}

// supervise watches g until no worker runs: it records each exit, stops
// the group at the first failure (root) or when ctx ends, forwards
// signals and sends SIGKILL when the grace is over. first is the first
// worker that failed, stopped or not.
func (s *supervisor) supervise(ctx context.Context, g *group, exits chan exitEvent) (root, first *worker, ctxErr error) {
	done := ctx.Done()
	for g.running() > 0 {
		select {
		case ev := <-exits:
			w := ev.w
			w.exited, w.at = true, ev.at
			// The guard is gone, and with it everything the rank left.
			_ = w.ctl.Close()
			w.code, w.sig = exitStatus(ev)
			if !ev.reported {
				s.guardLost(g, w, ev)
			}
			w.stopped = s.endedByStop(g, w)
			for _, f := range w.pipes {
				_ = f.SetReadDeadline(time.Now().Add(drainTimeout))
			}
			if w.code == 0 {
				break
			}
			if first == nil {
				first = w
			}
			// Fail fast, once: while the group is being stopped every rank
			// already has its signal and its grace.
			if !g.stopping {
				root = w
				g.stop(unix.SIGTERM, s.o.Grace)
			}
		case sig := <-s.sigs:
			s.onSignal(g, sig)
		case rep := <-g.stalls:
			s.onStall(g, rep, g.attempt)
		case <-done:
			done, ctxErr = nil, ctx.Err()
			g.stop(unix.SIGTERM, s.o.Grace)
		case <-g.killAt:
			g.killAt = nil
			g.signal(unix.SIGKILL)
		}
	}
	return root, first, ctxErr
}

// endedByStop says whether w's end is the stop amdrun began (a failed
// rank's SIGTERM, a forwarded signal, the SIGKILL after the grace), not a
// failure of its own: while the group is being stopped, it died of a
// signal, or exited 130 or 143 (how a handler for SIGINT or SIGTERM says
// "interrupted") or 128+the signal amdrun forwarded.
func (s *supervisor) endedByStop(g *group, w *worker) bool {
	if !g.stopping {
		return false
	}
	return w.sig != 0 || w.code == 128+int(unix.SIGINT) || w.code == 128+int(unix.SIGTERM) ||
		(s.interrupted != 0 && w.code == 128+int(s.interrupted))
}

// endingPending takes the signals received while no group runs and says
// whether one of them ends the run; the others have no worker to go to.
func (s *supervisor) endingPending() bool {
	for {
		select {
		case sig := <-s.sigs:
			if ss, _ := sig.(syscall.Signal); s.ending(ss) {
				return true
			}
		default:
			return false
		}
	}
}

// ending says whether ss ends the run, and records the first that does.
func (s *supervisor) ending(ss syscall.Signal) bool {
	if !slices.Contains(stopSignals, os.Signal(ss)) {
		return false
	}
	if s.interrupted == 0 {
		s.interrupted = ss
	}
	return true
}

// sameRequest is how long after an ending signal the same signal again is
// the same request: GNU timeout signals amdrun, then its process group,
// microseconds apart (issue 31). It is not forwarded again, which would
// start the ranks' handlers over, nor taken for a second Ctrl-C.
const sameRequest = time.Second

// onSignal forwards sig to every group; an ending signal stops the run and
// a later SIGINT after a SIGINT kills at once. A signal not in Forward
// (SIGCHLD, SIGURG, SIGWINCH from a caller's catch-all Signals channel) is
// amdrun's own business, never the workers'.
func (s *supervisor) onSignal(g *group, sig os.Signal) {
	ss, ok := sig.(syscall.Signal)
	switch {
	case !ok || !slices.Contains(s.o.forward(), sig):
	case !s.ending(ss):
		g.signal(ss)
	case ss == s.lastEnd && time.Since(s.lastEndAt) <= sameRequest:
	case ss == unix.SIGINT && s.sawINT:
		g.stop(unix.SIGKILL, s.o.Grace)
	default:
		s.lastEnd, s.lastEndAt, s.sawINT = ss, time.Now(), s.sawINT || ss == unix.SIGINT
		g.stop(ss, s.o.Grace)
	}
}

// holdCount is how many held files each guard keeps: all of them when
// the guards alone contain the job, none when the keeper holds them.
func (s *supervisor) holdCount() int {
	if s.keeper != nil {
		return 0
	}
	return len(s.o.Hold)
}

// start starts one rank's guard, in the job's namespaces when there are
// some, and returns once the guard runs; w.ready then gives the rank's
// pid. The guard's protocol is in proto_linux.go. logs are the rank's
// stdout and stderr log files (nil: none).
//
// A stream of an unprefixed rank that the console shows and no log file
// takes goes straight to Stdout or Stderr when that is a terminal, so
// that the rank sees a terminal there (tqdm, pdb, isatty); its guard then
// gives it a session of its own (see ShimMain). Every other stream is a
// pipe that amdrun copies. Local rank 0 reads the standard input amdrun
// hands on (s.stdin); the others read /dev/null.
func (s *supervisor) start(r *plan.Rank, c command, logs [2]*os.File, exits chan<- exitEvent) (*worker, error) {
	logged, console := s.streams(r.LocalRank)
	p, err := s.guardPipes(logged, console)
	if err != nil {
		return nil, err
	}
	cmd := s.guardCmd(r, c, p)
	w := &worker{r: r, tail: &tail{}, pumps: make(chan struct{}), ctl: p.ctlW, ready: make(chan int, 1)}
	for _, f := range p.reads {
		if f != nil {
			w.pipes = append(w.pipes, f)
		}
	}
	kept, err := s.launchGuard(cmd)
	closeFiles(p.theirs...)
	if err != nil {
		closeFiles(p.reads[:]...)
		closeFiles(p.ctlW, p.repR)
		return nil, err
	}
	if kept == 0 {
		w.guard = cmd.Process.Pid
	}
	go s.watch(w, cmd, kept, p.ctlW, p.repR, exits)
	w.started = time.Now()
	s.pump(w, p.reads, logs, console)
	return w, nil
}

// guardFiles are the pipes of one guard: the read ends of its rank's
// piped streams (nil: straight to the terminal), the rank's stdout and
// stderr, the control and report pipes, and theirs, the guard's ends that
// amdrun closes once it started.
type guardFiles struct {
	reads, child [2]*os.File
	ctlR, ctlW   *os.File
	repR, repW   *os.File
	theirs       []*os.File
}

// closeFiles closes every file of fs that is set.
func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// guardPipes makes a guard's pipes (see start); on error none is left
// open.
func (s *supervisor) guardPipes(logged, console Std) (*guardFiles, error) {
	p := &guardFiles{}
	fail := func(err error) (*guardFiles, error) {
		closeFiles(p.reads[:]...)
		closeFiles(p.theirs...)
		closeFiles(p.ctlW, p.repR)
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
	if p.ctlR, p.ctlW, err = os.Pipe(); err != nil {
		return fail(err)
	}
	p.theirs = append(p.theirs, p.ctlR)
	if p.repR, p.repW, err = os.Pipe(); err != nil {
		return fail(err)
	}
	p.theirs = append(p.theirs, p.repW)
	return p, nil
}

// guardCmd is the command that starts r's guard with its files: the
// control and report pipes at guardCtlFD and guardReportFD, then, unless
// the keeper holds them, the held files.
func (s *supervisor) guardCmd(r *plan.Rank, c command, p *guardFiles) *exec.Cmd {
	extra := []*os.File{p.ctlR, p.repW}
	if s.keeper == nil {
		extra = append(extra, s.o.Hold...)
	}
	cmd := &exec.Cmd{
		Path:       c.path,
		Args:       c.args,
		Env:        c.env,
		Stdout:     p.child[0],
		Stderr:     p.child[1],
		ExtraFiles: extra,
		// Its own group: a signal to amdrun's process group (kill -9 %1
		// in a shell) must leave the guard to clean up. No parent-death
		// signal: the guard learns of amdrun's death from its control
		// pipe, and must live on to sweep.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if r.LocalRank == 0 && s.stdin != nil {
		cmd.Stdin = s.stdin
	}
	return cmd
}

// launchGuard starts a guard's command: from a thread that joined the
// job's namespaces (ContainPIDNamespace), or through the keeper, which
// forks it in the job's user namespace and returns its pid there
// (ContainUserNamespace: amdrun cannot enter that namespace), or from any
// thread. kept is that pid; 0 when cmd was started here.
func (s *supervisor) launchGuard(cmd *exec.Cmd) (kept int, err error) {
	k := s.keeper
	switch {
	case k != nil && k.userns:
		var files []*os.File
		stdin, _ := cmd.Stdin.(*os.File)
		if stdin != nil {
			files = append(files, stdin)
		}
		files = append(files, cmd.Stdout.(*os.File), cmd.Stderr.(*os.File))
		files = append(files, cmd.ExtraFiles...)
		return k.startGuard(cmd.Args, cmd.Env, k.cwd, stdin != nil, files)
	case k != nil:
		started := make(chan error, 1)
		go func() {
			// Never unlocked: the thread has joined the job's namespaces
			// and ends with this goroutine.
			runtime.LockOSThread()
			if err := k.join(); err != nil {
				started <- err
				return
			}
			cmd.Dir = k.cwd
			started <- cmd.Start()
		}()
		return 0, <-started
	}
	return 0, cmd.Start()
}

// watch follows one started guard: it learns the rank's pid from the
// guard's report (found in amdrun's namespace), lets the guard go on,
// waits for it to end and sends the rank's end to exits. kept is the
// guard's pid in the job's namespace when the keeper started it (cmd did
// not run then): its end is its report pipe's.
func (s *supervisor) watch(w *worker, cmd *exec.Cmd, kept int, ctlW, repR *os.File, exits chan<- exitEvent) {
	defer repR.Close()
	rep := bufio.NewReader(repR)
	if kept != 0 {
		w.guard = hostPID(s.keeper.cmd.Process.Pid, kept)
	}
	pid := w.guard // until it names the rank
	if m, err := readReport(rep); err == nil && m.Kind == msgPid {
		n := m.Pid
		if s.keeper != nil {
			// The rank cannot be reaped before the answer below, so it is
			// still there to be found, even if it has exited.
			n = hostPID(w.guard, n)
		}
		if n > 0 {
			pid = n
		}
		_, _ = ctlW.Write([]byte{ctlAck})
	}
	w.ready <- pid
	ev := exitEvent{w: w}
	if kept == 0 {
		_ = cmd.Wait()
		ev.state = cmd.ProcessState
	}
	// A guard reports the rank's end last; EOF (its end) otherwise.
	for {
		m, err := readReport(rep)
		if err != nil {
			break
		}
		if m.Kind == msgStatus {
			ev.status, ev.reported = m.Status, true
		}
	}
	ev.at = time.Now()
	exits <- ev
}

// guardLost handles a guard that ended without reporting its rank's end
// (something killed it): the rank may live on, so it is killed with all
// it started, as the mode allows, and w.lost says what happened.
func (s *supervisor) guardLost(g *group, w *worker, ev exitEvent) {
	how := "ended without reporting its rank's end"
	if ev.state != nil {
		if ws, ok := ev.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			how = "was killed by " + unix.SignalName(ws.Signal())
		}
	}
	var what string
	switch {
	case s.keeper != nil && s.keeper.lost() != "":
		// The guard died with the keeper: the job is gone (issue 36.3).
		w.lost = s.keeper.lost()
		return
	case s.mode == ContainUserNamespace:
		what = "the keeper killed the rank and all it started"
	case s.keeper != nil:
		s.keeper.sweepOrphans()
		what = "amdrun had the keeper kill the rank and all it started"
	case s.reaping:
		live := map[int]bool{}
		for _, o := range g.workers {
			if !o.exited {
				live[o.guard] = true
			}
		}
		what = fmt.Sprintf("amdrun killed the rank and all it started (%d processes)", s.sweepOrphans(live))
	default:
		what = "the rank's processes may live on (amdrun could not be their subreaper)"
	}
	w.lost = fmt.Sprintf("its guard (pid %d) %s; %s", w.guard, how, what)
}

// command is how one rank's guard is started.
type command struct {
	path      string
	args, env []string
}

// lookup finds r's command on the PATH of env, as the guard will.
func (s *supervisor) lookup(r *plan.Rank, env []string) error {
	pathVar, _ := envlist.Lookup(env, "PATH")
	_, err := lookPath(r.Argv[0], pathVar)
	return err
}

// pump starts copying the worker's piped streams (reads; nil for one
// that goes straight to the terminal) to the console (the streams in
// console), its log files and its stderr tail; w.pumps closes when they
// are done.
func (s *supervisor) pump(w *worker, reads, logs [2]*os.File, console Std) {
	prefix := ""
	if s.o.Prefix {
		prefix = fmt.Sprintf("[rank%d]: ", w.r.Rank)
		if s.o.PrefixTemplate != "" {
			role, _ := envlist.Lookup(w.r.Env, "ROLE_NAME")
			prefix = PrefixFromTemplate(s.o.PrefixTemplate, role, w.r.Rank, w.r.LocalRank)
		}
	}
	dst := [2]io.Writer{s.o.Stdout, s.o.Stderr}
	var wg sync.WaitGroup
	for k, r := range reads {
		if r == nil {
			continue
		}
		st := &stream{con: s.con, prefix: prefix, raw: !s.o.Prefix && s.shown == 1, seen: &s.activity}
		if console&stdOf(k) != 0 {
			st.out = dst[k]
		}
		if logs[k] != nil {
			st.log = s.faults.wrap(logs[k])
		}
		if k == 1 {
			st.tail = w.tail
		}
		wg.Add(1)
		go func() { st.pump(r); wg.Done() }()
	}
	go func() { wg.Wait(); close(w.pumps) }()
}

// stdOf is the Std of stream k: 0 stdout, 1 stderr.
func stdOf(k int) Std { return Std(1 << k) }

// collect reads what local rank w.r.LocalRank recorded in its error file
// in attempt k, keeps a copy in its log directory (ad; nil: none) and
// parses it for the failure summary.
func (s *supervisor) collect(w *worker, k int, ad *attemptDir) {
	b := s.errs.read(k, w.r.LocalRank)
	// Read once: the directory stays empty, for the guards and the keeper
	// to remove should amdrun die.
	s.errs.drop(k, w.r.LocalRank)
	if b == nil {
		return
	}
	if ad != nil {
		if f, err := ad.create(w.r.LocalRank, "error.json"); err == nil {
			if _, err := f.Write(b); err == nil {
				w.recAt = f.Name()
			}
			f.Close()
		}
	}
	if rec, err := ParseErrorFile(b); err == nil {
		w.rec = rec
	}
}

// exitStatus is the shell's view of a rank's end: the exit code, or
// 128+signal with the signal. It is the rank's own status as its guard
// reported it, or else the guard's.
func exitStatus(ev exitEvent) (int, syscall.Signal) {
	ws := ev.status
	if !ev.reported {
		if ev.state == nil {
			return 1, 0
		}
		var ok bool
		if ws, ok = ev.state.Sys().(syscall.WaitStatus); !ok {
			return ev.state.ExitCode(), 0
		}
	}
	if ws.Signaled() {
		return 128 + int(ws.Signal()), ws.Signal()
	}
	return ws.ExitStatus(), 0
}

// limitHint names the resource limit behind a failed start, for the
// error: fork and clone fail with EAGAIN at the process limit, opening
// pipes and logs with EMFILE at the descriptor limit (issue 26).
func limitHint(err error) string {
	switch {
	case errors.Is(err, unix.EAGAIN):
		return " (the process limit: ulimit -u)"
	case errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE):
		return " (the open file limit: ulimit -n)"
	}
	return ""
}

// summary writes the failed workers of an attempt to Stderr, the root
// cause first. notStarted counts the ranks a failed start left unstarted
// (they are neither failed nor stopped).
func (s *supervisor) summary(g *group, root *worker, attempt, notStarted int) {
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
		case w.lost != "":
			// Not "signal SIGKILL": that was the guard's end, and the
			// rank was alive then (issue 26).
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
		if w.rec != nil {
			// What the rank recorded is its own account of the failure:
			// stderr may end with anything (atexit hooks, other threads).
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
// ends in Python's own words for a missing module or script: the
// interpreter was likely not the one meant (issue 22: a python3 without
// torch first on PATH); "" otherwise.
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

// devicesOf names a rank's devices in a message: "device 3", "devices
// 0,1,6,7", or "cpu" for a rank without a device.
func devicesOf(r *plan.Rank) string {
	switch len(r.Devices) {
	case 0:
		return r.DeviceLabel()
	case 1:
		return "device " + r.DeviceLabel()
	}
	return "devices " + r.DeviceLabel()
}

// attempts runs the attempts of a Run: the first, and a restart after
// each failure while --max-restarts allows and the devices have let go
// of the failed attempt's memory.
func (s *supervisor) attempts(ctx context.Context) (int, error) {
	mem := newMemWatch(s.plan, s.o)
	for attempt := 0; ; attempt++ {
		mem.baseline(attempt < s.plan.MaxRestarts)
		code, err := s.attempt(ctx, attempt)
		if err != nil || code == 0 || s.interrupted != 0 || attempt >= s.plan.MaxRestarts ||
			(s.stall != nil && s.o.OnStall != StallRestart) {
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
		if held := mem.wait(); len(held) > 0 {
			s.note(heldLine(held, s.o.RestartWait))
			return code, nil
		}
		s.note(fmt.Sprintf("amdrun: restarting the worker group (restart %d of %d)\n", attempt+1, s.plan.MaxRestarts))
	}
}
