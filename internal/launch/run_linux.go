package launch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amdrun/amdrun/internal/envlist"
	"github.com/amdrun/amdrun/internal/plan"
)

// Supported says whether Run can start workers here (Linux only); plans
// can be made anywhere.
const Supported = true

// drainTimeout bounds reading output after a worker exited: a child it
// left may hold the pipe open.
const drainTimeout = 2 * time.Second

// Run starts the plan's workers and supervises them until every one has
// exited and been reaped and every process they started is gone, however
// amdrun ends (o.Contain). Each worker runs under its guard, in its own
// process group, with exactly its Rank's argv and env plus
// TORCHELASTIC_RESTART_COUNT and TORCHELASTIC_ERROR_FILE. The first
// failure stops the others (SIGTERM, SIGKILL after Grace) with a summary;
// restarts follow while MaxRestarts allows. Cancelling ctx acts like
// SIGTERM. Signals, terminals and input: docs/supervision.md.
//
// exitCode is 0 when every worker succeeded, else the first failing
// worker's code (128+signal when killed), or 128+signal for a run ended by
// a signal no worker failed from. err is non-nil only when Run itself
// failed (a worker could not start: code 127 when not found, 126
// otherwise; a log file could not be made; the containment asked for is
// not permitted) or ctx ended the run (ctx.Err()).
func Run(ctx context.Context, p *plan.Plan, o RunOptions) (exitCode int, err error) {
	if p == nil || len(p.Ranks) == 0 {
		return 1, errors.New("launch: empty plan")
	}
	o.Stdout, o.Stderr = cmp.Or[io.Writer](o.Stdout, os.Stdout), cmp.Or[io.Writer](o.Stderr, os.Stderr)
	o.Grace = max(o.Grace, 0)
	if o.Forward == nil {
		o.Forward = DefaultSignals
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
	s.stacks = &stacker{errs: s.errs, cpu: map[int]uint64{}}
	defer s.serveStacks()()
	if s.o.StallTimeout == StallAuto {
		s.o.StallTimeout = DefaultStallTimeout
		if s.term[0] != nil || s.term[1] != nil {
			s.o.StallTimeout = 0
		}
	}
	if s.mode, err = openContainment(o.Contain, containOpts{self: o.Self, hold: o.Hold, errDir: s.errs.Name(), note: s.note}); err != nil {
		return 1, err
	}
	defer s.mode.close() // after every worker: only then may the lease go
	if s.sigs = o.Signals; s.sigs == nil {
		ch := make(chan os.Signal, 128) // Notify drops what a full channel cannot take
		signal.Notify(ch, notified(o.Forward)...)
		defer signal.Stop(ch)
		s.sigs = ch
	}
	return s.attempts(ctx)
}

// catchSIGPIPE catches SIGPIPE for good: a write to a closed console, even
// after Run, fails with EPIPE instead of making the exit code 141.
var catchSIGPIPE = sync.OnceFunc(func() { signal.Notify(make(chan os.Signal, 1), unix.SIGPIPE) })

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

// handedStdin is local rank 0's standard input: f, or /dev/null (nil) when
// f is amdrun's terminal and amdrun runs in its background (`amdrun ... &`),
// where the rank, in a session of its own, would take the shell's input.
// f that is not a terminal, or not amdrun's controlling one, is kept.
func handedStdin(f *os.File) *os.File {
	if f == nil {
		return nil
	}
	if fg, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP); err == nil && fg != unix.Getpgrp() {
		return nil
	}
	return f
}

// notified are the forwarded signals not ignored at start (nohup's SIGHUP
// stays ignored; signal.Notify would install a handler).
func notified(forwarded []os.Signal) []os.Signal {
	return slices.DeleteFunc(slices.Clone(forwarded), signal.Ignored)
}

// supervisor is the state of one Run, touched only by Run's goroutine.
type supervisor struct {
	plan        *plan.Plan
	o           RunOptions
	con         *console
	sigs        <-chan os.Signal
	job         *jobDir        // the run's log directory; nil without logs
	errs        *errorDir      // the ranks' error files
	notes       *faultyLog     // amdrun.log in the run's log directory; nil without logs
	faults      *logFaults     // the log files whose writes failed
	mode        container      // how the job is contained
	stdin       *os.File       // local rank 0's standard input; nil: /dev/null
	term        [2]*os.File    // Stdout, Stderr when they are terminals
	shown       int            // how many ranks the console shows
	lastEnd     syscall.Signal // the last ending signal forwarded, at lastEndAt
	lastEndAt   time.Time
	sawINT      bool           // a SIGINT was forwarded
	interrupted syscall.Signal // the first ending signal received, 0 if none
	stacks      *stacker       // asks the ranks for their stacks
	activity    atomic.Int64   // when a rank last wrote output (unix nanoseconds)
	stall       *stallReport   // the stall that ended this attempt; nil: none
	stallFiles  int            // stall reports so far, numbering their files
}

// worker is one started rank of an attempt.
type worker struct {
	r       *plan.Rank
	pid     int // the rank's pid as amdrun sees it (its guard's if unknown)
	exited  bool
	at      time.Time
	code    int            // exit code or 128+signal
	sig     syscall.Signal // killing signal, 0 if it exited
	stopped bool           // ended by the stop amdrun began (endedByStop)
	tail    *tail
	rec     *RankError  // what it recorded in its error file; nil if nothing
	recAt   string      // where that file is kept; "" when nowhere
	pipes   [2]*os.File // read ends (nil: none), for drain deadlines
	pumps   chan struct{}
	ctl     *os.File // the guard's control pipe
	ready   chan int // the rank's pid, once its guard reported it
	guard   int      // the guard's pid
	lost    string   // how a guard that did not report its rank's end ended, and what amdrun did
}

type exitEvent struct {
	w        *worker
	state    *os.ProcessState   // the guard's
	status   syscall.WaitStatus // the rank's, when its guard reported it
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

// signal sends sig to every running worker's group through its guard
// (which knows when the rank is gone: a reused group id is never hit).
func (g *group) signal(sig syscall.Signal) {
	for _, w := range g.workers {
		if !w.exited {
			_, _ = w.ctl.Write([]byte{ctlSignal(sig)})
		}
	}
}

// stop begins the shutdown (sig now, SIGKILL after grace); again, only sig.
func (g *group) stop(sig syscall.Signal, grace time.Duration) {
	g.signal(sig)
	if !g.stopping {
		g.stopping = true
		g.killAt = time.After(grace)
	}
}

func (g *group) running() bool {
	return slices.ContainsFunc(g.workers, func(w *worker) bool { return !w.exited })
}

func (s *supervisor) attempt(ctx context.Context, attempt int) (int, error) {
	envs, code, err := s.envs(attempt)
	if err != nil {
		return code, err
	}
	ad, logs, err := s.attemptLogs(attempt)
	defer ad.close()
	if err != nil {
		return 1, err
	}
	g := &group{attempt: attempt}
	s.stall = nil
	exits := make(chan exitEvent, len(s.plan.Ranks))
	startCode, startErr := s.startGroup(g, envs, logs, exits)
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

// envs are the ranks' environments in attempt, each command looked up
// before any starts.
func (s *supervisor) envs(attempt int) ([][]string, int, error) {
	envs := make([][]string, len(s.plan.Ranks))
	for i := range s.plan.Ranks {
		r := &s.plan.Ranks[i]
		env := plan.WithEnv(r.Env, "TORCHELASTIC_RESTART_COUNT", strconv.Itoa(attempt))
		env = plan.WithEnv(env, EnvErrorFile, s.errs.path(attempt, r.LocalRank))
		env = s.errs.frEnv(s.errs.stackEnv(env, attempt, r.Rank), attempt)
		pathVar, _ := envlist.Lookup(env, "PATH")
		if _, err := lookPath(r.Argv[0], pathVar); err != nil { // as the guard will
			return nil, execFailureCode(err), fmt.Errorf("launch: rank %d: %w", r.Rank, err)
		}
		envs[i] = env
	}
	return envs, 0, nil
}

// attemptLogs makes attempt's log directory and files (nil without logs);
// ad.close closes them.
func (s *supervisor) attemptLogs(attempt int) (ad *attemptDir, logs [][2]*os.File, err error) {
	logs = make([][2]*os.File, len(s.plan.Ranks))
	if s.job == nil {
		return nil, logs, nil
	}
	if ad, err = s.job.attempt(attempt, s.plan.Ranks); err != nil {
		return nil, logs, err
	}
	for i, r := range s.plan.Ranks {
		logged, _ := s.streams(r.LocalRank)
		for k, name := range []string{"stdout.log", "stderr.log"} {
			if logged&stdOf(k) != 0 {
				if logs[i][k], err = ad.create(r.LocalRank, name); err != nil {
					return ad, logs, err
				}
				ad.logs = append(ad.logs, logs[i][k])
			}
		}
	}
	return ad, logs, nil
}

// startGroup starts every rank's guard into g and waits for their pids; a
// rank that cannot start stops the others.
func (s *supervisor) startGroup(g *group, envs [][]string, logs [][2]*os.File, exits chan exitEvent) (int, error) {
	var startErr error
	startCode := 0
	for i := range s.plan.Ranks {
		w, err := s.start(&s.plan.Ranks[i], envs[i], logs[i], exits)
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

// supervise watches g until no worker runs, stopping it at the first
// failure (root) or when ctx ends. first is the first worker that failed,
// stopped or not.
func (s *supervisor) supervise(ctx context.Context, g *group, exits chan exitEvent) (root, first *worker, ctxErr error) {
	done := ctx.Done()
	for g.running() {
		select {
		case ev := <-exits:
			w := ev.w
			w.exited, w.at = true, ev.at
			_ = w.ctl.Close() // the guard is gone, and all the rank left
			w.code, w.sig = exitStatus(ev)
			if !ev.reported {
				s.guardLost(g, w)
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
			if !g.stopping { // once: a stopping group has its signal and grace
				root = w
				g.stop(unix.SIGTERM, s.o.Grace)
			}
		case sig := <-s.sigs:
			s.onSignal(g, sig)
		case rep := <-g.stalls:
			s.onStall(g, rep)
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

// endedByStop says whether w's end is the stop amdrun began: while the
// group stops, it died of a signal or exited 130, 143 (a SIGINT or SIGTERM
// handler's) or 128+the signal amdrun forwarded.
func (s *supervisor) endedByStop(g *group, w *worker) bool {
	return g.stopping && (w.sig != 0 || w.code == 128+int(unix.SIGINT) || w.code == 128+int(unix.SIGTERM) ||
		(s.interrupted != 0 && w.code == 128+int(s.interrupted)))
}

// endingPending says whether a signal received while no group ran ends the run.
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

// sameRequest is how long after an ending signal the same signal is the
// same request: GNU timeout signals amdrun, then its process group,
// microseconds apart (issue 31). It is neither forwarded again nor a
// second Ctrl-C.
const sameRequest = time.Second

// onSignal forwards sig (if in Forward); an ending signal stops the run,
// and a SIGINT after a SIGINT kills at once.
func (s *supervisor) onSignal(g *group, sig os.Signal) {
	ss, ok := sig.(syscall.Signal)
	switch {
	case !ok || !slices.Contains(s.o.Forward, sig):
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

// pump copies the worker's piped streams (nil: the terminal) to the
// console, its log files and its stderr tail.
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

// collect reads, keeps in the log directory (ad) and parses w's error file.
func (s *supervisor) collect(w *worker, k int, ad *attemptDir) {
	b := s.errs.read(k, w.r.LocalRank)
	s.errs.drop(k, w.r.LocalRank) // read once: the directory stays empty
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

// attempts runs the first attempt and a restart after each failure while
// --max-restarts allows and the devices have let go of their memory.
func (s *supervisor) attempts(ctx context.Context) (int, error) {
	mem := newMemWatch(s.plan, s.o)
	for attempt := 0; ; attempt++ {
		mem.baseline(attempt < s.plan.MaxRestarts)
		code, err := s.attempt(ctx, attempt)
		if err != nil || code == 0 || s.interrupted != 0 || attempt >= s.plan.MaxRestarts ||
			(s.stall != nil && s.o.OnStall != StallRestart) {
			return code, err
		}
		// What came while no worker ran decides before a new group starts.
		if err := ctx.Err(); err != nil {
			return code, err
		}
		if s.endingPending() {
			return code, nil
		}
		if held := mem.wait(250 * time.Millisecond); len(held) > 0 {
			s.note(heldLine(held, s.o.RestartWait))
			return code, nil
		}
		s.note(fmt.Sprintf("amdrun: restarting the worker group (restart %d of %d)\n", attempt+1, s.plan.MaxRestarts))
	}
}

// threadsPerRank is how many tasks (RLIMIT_NPROC counts threads) a rank
// costs as it starts, with its guard and shim (measured 5 to 7).
const threadsPerRank = 8

// threadsOwn is what amdrun itself may still add while it supervises.
const threadsOwn = 8

// checkProcessRoom refuses a stack limit too small or a ulimit -u without
// room for ranks ranks, their guards and threads: Go cannot recover from a
// thread it fails to create (issue 26).
func checkProcessRoom(ranks int) error {
	if err := checkStack(); err != nil {
		return err
	}
	var rl unix.Rlimit
	if os.Geteuid() == 0 || unix.Getrlimit(unix.RLIMIT_NPROC, &rl) != nil || rl.Cur == unix.RLIM_INFINITY {
		return nil
	}
	used := userTasks(os.Getuid())
	need := threadsOwn + threadsPerRank*ranks
	if used+need <= int(rl.Cur) {
		return nil
	}
	return fmt.Errorf("launch: the process limit (ulimit -u %d) is too low for %d rank(s): this user runs %d processes and threads, and the ranks with their guards need about %d more; raise ulimit -u or run fewer ranks",
		rl.Cur, ranks, used, need)
}

// minStack is the smallest ulimit -s for the guards and keeper: under 16
// KiB one died of SIGSEGV now and then (issue 36.6).
const minStack = 32 << 10

func checkStack() error {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_STACK, &rl) != nil || rl.Cur == unix.RLIM_INFINITY || rl.Cur >= minStack {
		return nil
	}
	return fmt.Errorf("launch: the stack limit (ulimit -s %d) is too small for amdrun's guards: raise it to at least %d (KiB)", rl.Cur>>10, minStack>>10)
}

// userTasks counts uid's tasks as RLIMIT_NPROC does.
func userTasks(uid int) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if f := strings.Fields(statusLine(b, "Uid")); err == nil && len(f) > 0 && f[0] == strconv.Itoa(uid) {
			threads, _ := strconv.Atoi(statusLine(b, "Threads"))
			n += max(threads, 1)
		}
	}
	return n
}
