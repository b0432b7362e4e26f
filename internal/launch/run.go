package launch

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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
	if a := cmp.Or(StallAction(s), StallReport); slices.Contains(StallActions, a) {
		return a, nil
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
		p := filepath.Join(cmp.Or(dir, "."), file)
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

// Std is a set of a rank's standard streams, numbered as torchrun's Std:
// 0 none, 1 stdout, 2 stderr, 3 both.
type Std int

const (
	StdNone Std = 0
	StdOut  Std = 1
	StdErr  Std = 2
	StdAll  Std = StdOut | StdErr
)

// StreamNames name each value of -r and -t.
var StreamNames = []string{StdNone: "none", StdOut: "stdout", StdErr: "stderr", StdAll: "both"}

// ErrStreams is wrapped by ParseStreams's errors.
var ErrStreams = errors.New("want 0-3 (0 none, 1 stdout, 2 stderr, 3 both) or LOCAL_RANK:0-3 pairs such as 0:3,1:0")

// Streams says which streams of each local rank torchrun's -r or -t value
// covers; the zero value covers nothing.
type Streams struct {
	All Std // every local rank's, when PerRank is nil
	// PerRank maps local ranks to their streams ("0:3,1:0"); those it does
	// not name get StdNone, as in torchrun.
	PerRank map[int]Std
}

// ParseStreams parses a torchrun -r/-t value: "0" to "3" for every local
// rank, or LOCAL_RANK:STD pairs. "" is StdNone; any other value gives an
// error wrapping ErrStreams.
func ParseStreams(s string) (Streams, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Streams{}, nil
	}
	if !strings.Contains(s, ":") {
		v, err := parseStd(s)
		if err != nil {
			return Streams{}, fmt.Errorf("%q: %w", s, ErrStreams)
		}
		return Streams{All: v}, nil
	}
	out := Streams{PerRank: map[int]Std{}}
	for _, pair := range strings.Split(s, ",") {
		r, v, ok := strings.Cut(pair, ":")
		lr, err := strconv.Atoi(r)
		std, err2 := parseStd(v)
		if !ok || err != nil || lr < 0 || err2 != nil {
			return Streams{}, fmt.Errorf("%q: %w", s, ErrStreams)
		}
		if _, dup := out.PerRank[lr]; dup {
			return Streams{}, fmt.Errorf("%q: local rank %d given twice", s, lr)
		}
		out.PerRank[lr] = std
	}
	return out, nil
}

func parseStd(s string) (Std, error) {
	if len(s) != 1 || s[0] < '0' || s[0] > '3' {
		return 0, ErrStreams
	}
	return Std(s[0] - '0'), nil
}

// For returns the streams of local rank lr.
func (s Streams) For(lr int) Std {
	if s.PerRank != nil {
		return s.PerRank[lr]
	}
	return s.All
}

// IsZero says whether s covers no stream of any rank.
func (s Streams) IsZero() bool {
	for _, v := range s.PerRank {
		if v != StdNone {
			return false
		}
	}
	return s.All == StdNone
}

// DefaultSignals are Run's forwarded signals when Forward is nil: torchrun's
// default --signals-to-handle, and SIGUSR1, SIGUSR2 (Slurm's preemption).
var DefaultSignals = signalsNamed(ForwardedSignals)

var stopSignals = signalsNamed(StopSignals)

// signalsNamed are names' signals; an unknown name panics at start.
func signalsNamed(names []string) []os.Signal {
	out := make([]os.Signal, len(names))
	for i, n := range names {
		sig := unix.SignalNum(n)
		if sig == 0 {
			panic("launch: unknown signal " + n)
		}
		out[i] = sig
	}
	return out
}

// unforwardable are signals that cannot be caught, or that the Go runtime
// or amdrun needs.
var unforwardable = []syscall.Signal{unix.SIGKILL, unix.SIGSTOP, unix.SIGCHLD, unix.SIGURG, unix.SIGPIPE,
	unix.SIGSEGV, unix.SIGBUS, unix.SIGFPE, unix.SIGILL, unix.SIGTRAP, unix.SIGABRT, unix.SIGPROF}

// ParseSignals reads --signals-to-handle: comma-separated signal names,
// with or without "SIG", any case. A name that is not a signal, one amdrun
// cannot forward and an empty list are errors.
func ParseSignals(list string) ([]os.Signal, error) {
	var out []os.Signal
	for _, name := range strings.Split(list, ",") {
		name = strings.ToUpper(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		if !strings.HasPrefix(name, "SIG") {
			name = "SIG" + name
		}
		sig := unix.SignalNum(name)
		if sig == 0 {
			return nil, fmt.Errorf("%s is not a signal", name)
		}
		if slices.Contains(unforwardable, sig) {
			return nil, fmt.Errorf("%s cannot be forwarded (it cannot be caught, or amdrun itself needs it)", name)
		}
		if !slices.Contains(out, os.Signal(sig)) {
			out = append(out, sig)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty list of signals")
	}
	return out, nil
}

// PrefixFromTemplate expands TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE for one
// rank as Python's string.Template.safe_substitute: $role_name, $rank and
// $local_rank (also ${name}) are replaced, $$ is a dollar, all else kept.
func PrefixFromTemplate(tmpl, role string, rank, localRank int) string {
	vars := map[string]string{"role_name": role, "rank": strconv.Itoa(rank), "local_rank": strconv.Itoa(localRank)}
	return templateVar.ReplaceAllStringFunc(tmpl, func(m string) string {
		if m == "$$" {
			return "$"
		}
		if v, ok := vars[strings.Trim(m[1:], "{}")]; ok {
			return v
		}
		return m
	})
}

// templateVar is what string.Template substitutes: $$, ${id} and $id, an
// id being an ASCII Python identifier.
var templateVar = regexp.MustCompile(`\$(\$|\{[_A-Za-z][_A-Za-z0-9]*\}|[_A-Za-z][_A-Za-z0-9]*)`)
