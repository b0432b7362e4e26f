package launch

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amdrun/amdrun/internal/envlist"
	"github.com/amdrun/amdrun/internal/plan"
)

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
