package launch

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ShimArg is the hidden first argument that makes amdrun act as the bind
// shim: `amdrun __amdrun_bind --cpus LIST --mems LIST --mempolicy P --
// argv...`. The main function must hand such a command line to ShimMain
// before doing anything else.
const ShimArg = "__amdrun_bind"

// DefaultGrace is amdrun's default time between SIGTERM and SIGKILL
// (--grace).
const DefaultGrace = 10 * time.Second

// ErrNotSupported is returned by Run and ShimMain on systems other than
// Linux.
var ErrNotSupported = errors.New("launch: running workers is only supported on Linux")

// ForwardedSignals names the signals Run receives and passes to every
// worker group (and each guard catches for it), in the order amdrun lists
// them; --signals-to-handle accepts a subset. It is the one list: Run's
// signal.Notify set is made from it.
var ForwardedSignals = []string{"SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"}

// StopSignals names the forwarded signals that also stop the run (the
// others are only passed on); it is the one list, stopSignals is made
// from it.
var StopSignals = []string{"SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"}

// RunOptions controls Run. The zero value is usable.
type RunOptions struct {
	// Stdout and Stderr receive the workers' output and amdrun's own
	// messages (restarts, failure summary); nil means os.Stdout/os.Stderr.
	// When one is a terminal (an *os.File), an unprefixed rank's stream
	// that goes to no log file is handed that terminal itself (see Run).
	Stdout, Stderr io.Writer
	// Stdin is local rank 0's standard input; nil means /dev/null. The
	// other ranks always read /dev/null.
	Stdin *os.File
	// Prefix starts every console line with "[rankN]: " (the global rank).
	// Lines of different ranks that amdrun copies never interleave
	// mid-line either way.
	Prefix bool
	// LogDir, when set, receives torchrun's log layout (see Redirects):
	// a fresh LogDir/<Plan.RunID>_<8 random characters>/ per Run, with
	// attempt_<k>/<local rank>/stdout.log, stderr.log and error.json (a
	// copy of what the rank recorded) per attempt, and amdrun.log.
	// Nothing there is ever overwritten and no link is followed.
	LogDir string
	// RanksFilter lists the local ranks whose output reaches the console;
	// nil means all. It does not change what the log files get.
	RanksFilter []int
	// Grace is the time between SIGTERM and SIGKILL; zero sends SIGKILL
	// right after SIGTERM.
	Grace time.Duration
	// Self is the amdrun binary that runs each rank's guard and bind shim
	// (and the keeper of the job's PID namespace); "" means
	// os.Executable().
	Self string
	// Contain is how the job is contained (see Containment); the zero
	// value, ContainAuto, is the strongest permitted here.
	Contain Containment
	// Hold are files kept open until every process of the job is gone,
	// however the job ends, even if amdrun is killed: the device leases'
	// lock files, whose flock the kernel keeps while any holder has them
	// open. The processes that watch over the job (the keeper, or each
	// rank's guard) hold duplicates; Run does not close these.
	Hold []*os.File
	// Signals, when set, replaces the signals Run would otherwise receive
	// itself through signal.Notify (ForwardedSignals). Tests inject
	// signals through it.
	Signals <-chan os.Signal
	// Forward are the signals Run catches and passes to every group
	// (torchrun's --signals-to-handle); nil means DefaultSignals. SIGINT,
	// SIGTERM, SIGHUP and SIGQUIT stop the run, any other is only passed
	// on. A signal not in Forward is not caught: it does to amdrun what
	// it does to any process.
	Forward []os.Signal
	// PrefixTemplate, when set with Prefix, is the prefix of each rank's
	// console lines, torchrun's TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE
	// (see PrefixFromTemplate); "" means "[rankN]: ".
	PrefixTemplate string
	// OnStart, when set, is called with each worker's global rank and pid
	// (as this process sees it) right after it starts.
	OnStart func(rank, pid int)
	// Redirects says which streams of each local rank go only to its log
	// files and not to the console (torchrun's -r/--redirects); Tee which
	// go to both (-t/--tee); a stream in neither goes to the console
	// only. When both are zero, LogDir gets every stream, as Tee StdAll.
	// Without LogDir, either writes the layout into a fresh temporary
	// directory that Run keeps and names on Stderr (as torchrun does).
	Redirects, Tee Streams
	// Quiet keeps Run's warnings off Stderr (-q); its errors and the
	// end-of-run summary of lost log output still come.
	Quiet bool

	// StallTimeout, when positive, is how long the job may go without
	// progress (no rank writes output, touches its AMDRUN_HEARTBEAT file
	// or changes its sampled stack) before it is stalled (see
	// docs/supervision.md); 0 never; StallAuto: 30 minutes, unless Stdout
	// or Stderr is a terminal (someone watches; a pdb prompt is no stall).
	StallTimeout time.Duration
	// OnStall is what a stall does beyond its report; the zero value,
	// StallReport, only reports and keeps waiting.
	OnStall StallAction
	// RestartWait bounds the wait, before a restart, until the devices
	// hold no more memory than before the failed attempt (0: no wait);
	// when they still do, Run does not restart. MemUsed reads a device's
	// memory in use (nil: ReadMemUsed).
	RestartWait time.Duration
	MemUsed     MemUsed
}

// StallAuto is RunOptions.StallTimeout's "30 minutes unless on a
// terminal" (--stall-timeout's default).
const StallAuto time.Duration = -1

// DefaultStallTimeout is the stall timeout of a job no terminal watches:
// longer than NCCL's 10-minute watchdog, so that torch's own timeout
// fires first where it has one, and than a checkpoint write or a
// compilation that prints nothing.
const DefaultStallTimeout = 30 * time.Minute

// StalledExitCode is Run's exit code for a job stopped because it
// stalled (--on-stall stop, or restart with no restart left): timeout(1)'s,
// apart from a crash's.
const StalledExitCode = 124

// StallAction is what Run does about a stalled job (--on-stall).
type StallAction string

// The stall actions; StallActions lists them.
const (
	StallReport  StallAction = "report"
	StallStop    StallAction = "stop"
	StallRestart StallAction = "restart"
)

// StallActions are the words of --on-stall, in the order the help lists them.
var StallActions = []StallAction{StallReport, StallStop, StallRestart}

// ParseStallAction reads a word of StallActions; "" is StallReport.
func ParseStallAction(s string) (StallAction, error) {
	if s == "" {
		return StallReport, nil
	}
	for _, a := range StallActions {
		if string(a) == s {
			return a, nil
		}
	}
	return "", fmt.Errorf("launch: unknown stall action %q", s)
}

// execFailureCode is the exit status of a command that could not be run,
// as a shell reports it: 127 when it does not exist, 126 otherwise.
func execFailureCode(err error) int {
	if errors.Is(err, fs.ErrNotExist) { // also unix.ENOENT from exec
		return 127
	}
	return 126
}

// lookPath finds file in the directories of path (a PATH value) as
// execvp does: a name with a slash is used as is. It returns an error
// wrapping fs.ErrNotExist when nothing executable is found.
func lookPath(file, path string) (string, error) {
	if strings.Contains(file, "/") {
		if err := executable(file); err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err // the path is named once, in front
			}
			return "", fmt.Errorf("%s: %w", file, err)
		}
		return file, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, file)
		if executable(p) == nil {
			if !strings.Contains(p, "/") {
				p = "./" + p
			}
			return p, nil
		}
	}
	return "", &notFound{file: file}
}

// notFound is lookPath's error for a name found on no PATH directory; it
// is fs.ErrNotExist without repeating "file does not exist".
type notFound struct{ file string }

func (e *notFound) Error() string { return e.file + ": executable file not found in PATH" }

func (e *notFound) Unwrap() error { return fs.ErrNotExist }

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fs.ErrPermission
	}
	return nil
}
