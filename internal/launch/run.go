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

// ShimArg is the hidden first argument that makes amdrun the bind shim;
// main hands such a command line to ShimMain first.
const ShimArg = "__amdrun_bind"

// DefaultGrace is --grace's default time between SIGTERM and SIGKILL.
const DefaultGrace = 10 * time.Second

// ErrNotSupported is Run's and ShimMain's error off Linux.
var ErrNotSupported = errors.New("launch: running workers is only supported on Linux")

// ForwardedSignals names the signals Run passes to every worker group
// (--signals-to-handle takes a subset).
var ForwardedSignals = []string{"SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"}

// StopSignals names the forwarded signals that also stop the run.
var StopSignals = []string{"SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"}

// RunOptions controls Run. The zero value is usable.
type RunOptions struct {
	// Stdout and Stderr receive the workers' output and amdrun's messages;
	// nil means os.Stdout/os.Stderr.
	Stdout, Stderr io.Writer
	// Stdin is local rank 0's standard input; nil means /dev/null, as for
	// the other ranks.
	Stdin *os.File
	// Prefix starts every console line with "[rankN]: " (the global rank).
	Prefix bool
	// LogDir, when set, receives torchrun's log layout (see jobDir and
	// Redirects); "": none.
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
	// Hold are files (the lease locks) kept open until every process of
	// the job is gone, even if amdrun is killed; Run does not close them.
	Hold []*os.File
	// Signals, when set, replaces signal.Notify's channel (for tests).
	Signals <-chan os.Signal
	// Forward are the signals Run catches and passes to every group
	// (--signals-to-handle); nil means DefaultSignals.
	Forward []os.Signal
	// PrefixTemplate, when set with Prefix, is torchrun's
	// TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE; "" means "[rankN]: ".
	PrefixTemplate string
	// OnStart, when set, gets each worker's global rank and pid (as this
	// process sees it) right after it starts.
	OnStart func(rank, pid int)
	// Redirects says which streams of each local rank go only to its log
	// files (-r), Tee which go to both (-t); when both are zero, LogDir gets
	// every stream. Without LogDir, either writes into a temporary one.
	Redirects, Tee Streams
	// Quiet keeps Run's warnings off Stderr (-q).
	Quiet bool

	// StallTimeout, when positive, is how long the job may go without
	// progress before it is stalled (docs/supervision.md); 0 never.
	StallTimeout time.Duration
	// OnStall is what a stall does beyond its report (zero: StallReport).
	OnStall StallAction
	// RestartWait bounds the wait before a restart until the devices hold
	// no more memory than before (0: no wait); when they still do, Run does
	// not restart. MemUsed reads it (nil: ReadMemUsed).
	RestartWait time.Duration
	MemUsed     MemUsed
}

// StallAuto is StallTimeout's DefaultStallTimeout unless on a terminal
// (a pdb prompt is no stall).
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

// lookPath finds file on path as execvp does; an error wrapping
// fs.ErrNotExist when nothing is found.
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
