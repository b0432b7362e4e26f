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

// ShimArg is the hidden first argument that makes amdrun the bind shim
// (`amdrun __amdrun_bind --cpus LIST --mems LIST --mempolicy P --
// argv...`); main hands such a command line to ShimMain first.
const ShimArg = "__amdrun_bind"

// DefaultGrace is --grace's default time between SIGTERM and SIGKILL.
const DefaultGrace = 10 * time.Second

// ErrNotSupported is Run's and ShimMain's error off Linux.
var ErrNotSupported = errors.New("launch: running workers is only supported on Linux")

// ForwardedSignals names the signals Run passes to every worker group, in
// amdrun's order: the one list (--signals-to-handle takes a subset).
var ForwardedSignals = []string{"SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"}

// StopSignals names the forwarded signals that also stop the run.
var StopSignals = []string{"SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"}

// RunOptions controls Run. The zero value is usable.
type RunOptions struct {
	// Stdout and Stderr receive the workers' output and amdrun's messages;
	// nil means os.Stdout/os.Stderr. A terminal (*os.File) among them is
	// handed to an unprefixed rank's stream that goes to no log (see Run).
	Stdout, Stderr io.Writer
	// Stdin is local rank 0's standard input; nil means /dev/null, as for
	// the other ranks.
	Stdin *os.File
	// Prefix starts every console line with "[rankN]: " (the global rank).
	// Lines amdrun copies never interleave mid-line either way.
	Prefix bool
	// LogDir, when set, receives torchrun's log layout (see Redirects): a
	// fresh LogDir/<Plan.RunID>_<8 random characters>/ per Run, with
	// attempt_<k>/<local rank>/stdout.log, stderr.log and error.json, and
	// amdrun.log; nothing is overwritten and no link followed.
	LogDir string
	// RanksFilter lists the local ranks whose output reaches the console
	// (nil: all); the log files get everything.
	RanksFilter []int
	// Grace is the time between SIGTERM and SIGKILL (zero: none).
	Grace time.Duration
	// Self is the amdrun binary that runs the guards, bind shims and
	// keeper; "" means os.Executable().
	Self string
	// Contain is how the job is contained (see Containment); the zero
	// value, ContainAuto, is the strongest permitted here.
	Contain Containment
	// Hold are files kept open until every process of the job is gone,
	// even if amdrun is killed: the lease lock files, whose flock lasts
	// while any holder has them open. The job's watchers (the keeper, or
	// each guard) hold duplicates; Run does not close these.
	Hold []*os.File
	// Signals, when set, replaces the signals Run would receive through
	// signal.Notify (tests inject signals through it).
	Signals <-chan os.Signal
	// Forward are the signals Run catches and passes to every group
	// (torchrun's --signals-to-handle); nil means DefaultSignals. SIGINT,
	// SIGTERM, SIGHUP and SIGQUIT also stop the run. A signal not in
	// Forward is not caught.
	Forward []os.Signal
	// PrefixTemplate, when set with Prefix, is torchrun's
	// TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE (see PrefixFromTemplate); ""
	// means "[rankN]: ".
	PrefixTemplate string
	// OnStart, when set, gets each worker's global rank and pid (as this
	// process sees it) right after it starts.
	OnStart func(rank, pid int)
	// Redirects says which streams of each local rank go only to its log
	// files (torchrun's -r), Tee which go to both (-t); others go to the
	// console only. When both are zero, LogDir gets every stream. Without
	// LogDir, either writes into a fresh temporary directory that Run keeps
	// and names on Stderr (as torchrun does).
	Redirects, Tee Streams
	// Quiet keeps Run's warnings off Stderr (-q); errors and the summary of
	// lost log output still come.
	Quiet bool

	// StallTimeout, when positive, is how long the job may go without
	// progress (output, its AMDRUN_HEARTBEAT file, a changed stack) before
	// it is stalled (docs/supervision.md); 0 never; StallAuto: 30 minutes
	// unless Stdout or Stderr is a terminal (a pdb prompt is no stall).
	StallTimeout time.Duration
	// OnStall is what a stall does beyond its report (zero: StallReport).
	OnStall StallAction
	// RestartWait bounds the wait before a restart until the devices hold
	// no more memory than before the failed attempt (0: no wait); when they
	// still do, Run does not restart. MemUsed reads a device's memory in
	// use (nil: ReadMemUsed).
	RestartWait time.Duration
	MemUsed     MemUsed
}

// StallAuto is StallTimeout's "30 minutes unless on a terminal".
const StallAuto time.Duration = -1

// DefaultStallTimeout is the stall timeout of a job no terminal watches:
// longer than NCCL's 10-minute watchdog, a checkpoint or a compilation.
const DefaultStallTimeout = 30 * time.Minute

// StalledExitCode is Run's exit code for a stalled job: timeout(1)'s.
const StalledExitCode = 124

// StallAction is what Run does about a stalled job (--on-stall).
type StallAction string

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

// execFailureCode is a shell's status for a command it could not run: 127
// when it does not exist, 126 otherwise.
func execFailureCode(err error) int {
	if errors.Is(err, fs.ErrNotExist) { // also unix.ENOENT from exec
		return 127
	}
	return 126
}

// lookPath finds file on path (a PATH value) as execvp does (a name with a
// slash as is); an error wrapping fs.ErrNotExist when nothing is found.
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

// notFound is lookPath's fs.ErrNotExist for a name on no PATH directory.
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
