package launch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// Containment is how Run keeps every process a job starts from outliving
// it however amdrun ends (--contain; docs/supervision.md, "Containment").
type Containment string

// The containment modes, as --contain names them.
const (
	// ContainAuto is the strongest mode permitted here: ContainPIDNamespace
	// as root, else ContainUserNamespace where the kernel permits one, else
	// ContainSubreaper.
	ContainAuto Containment = ""
	// ContainPIDNamespace is pidNamespace: a PID namespace and its keeper.
	ContainPIDNamespace Containment = "pid-namespace"
	// ContainUserNamespace is userNamespace: the same in a user namespace.
	ContainUserNamespace Containment = "user-namespace"
	// ContainSubreaper is subreaper: the guards, and amdrun a subreaper.
	ContainSubreaper Containment = "subreaper"
)

// ErrContainment: Run's error wraps it when the mode asked for is not permitted.
var ErrContainment = errors.New("cannot contain the job in the namespaces asked for")

// container is one containment mode at work for one Run; the supervisor
// never asks which mode it is. Each mode's file registers it.
type container interface {
	// guardHeld are the held files (RunOptions.Hold) every guard keeps
	// open (none when a keeper holds them).
	guardHeld() []*os.File
	// startGuard starts cmd, a rank's guard, in the job. kept is the
	// guard's pid in the job's namespace when a keeper forked it instead
	// (cmd did not run); 0 when cmd was started.
	startGuard(cmd *exec.Cmd) (kept int, err error)
	// outerPID is amdrun's pid of the job's pid, a child of parent
	// (amdrun's pid; 0: of the keeper); 0 when there is none.
	outerPID(parent, pid int) int
	// guardLost kills, as far as the mode can, the rank of a guard that
	// ended without reporting (guard says how) and all it started; live
	// are the guards still running. It returns the summary's line.
	guardLost(guard string, live map[int]bool) string
	// close returns when nothing of the job is left: only then may the
	// lease go.
	close()
}

type containOpts struct {
	self   string     // amdrun's binary
	hold   []*os.File // RunOptions.Hold
	errDir string     // the ranks' error files, for a keeper to remove should amdrun die
	asked  bool       // --contain named the mode; false: auto chose it
	note   func(string)
}

type containMode struct {
	name Containment
	auto int // --contain auto tries the highest first; 0: only by name
	// open sets the mode up for one Run, or says why it is not permitted.
	open func(containOpts) (container, error)
	// doctor is what amdrun doctor says of the mode; with doctorWhy the
	// first line adds why no stronger mode was chosen.
	doctor    []ModeLine
	doctorWhy bool
}

var modes []containMode

func register(m containMode) {
	modes = append(modes, m)
	slices.SortStableFunc(modes, func(a, b containMode) int { return b.auto - a.auto })
}

func modeNamed(c Containment) *containMode {
	if i := slices.IndexFunc(modes, func(m containMode) bool { return m.name == c }); i >= 0 {
		return &modes[i]
	}
	return nil
}

// ParseContainment parses "auto" or a mode's name (any case).
func ParseContainment(s string) (Containment, error) {
	c := Containment(strings.ToLower(strings.TrimSpace(s)))
	if c == "auto" {
		return ContainAuto, nil
	}
	if modeNamed(c) != nil {
		return c, nil
	}
	valid := []string{"auto"}
	for _, m := range modes {
		valid = append(valid, string(m.name))
	}
	return "", fmt.Errorf("contain: unknown mode %q (valid: %s)", s, strings.Join(valid, ", "))
}

// String names the mode as --contain spells it.
func (c Containment) String() string {
	if c == ContainAuto {
		return "auto"
	}
	return string(c)
}

// A ModeLine is one line amdrun doctor says of a containment mode.
type ModeLine struct{ Name, Detail, Hint string }

// Lines are what amdrun doctor says of c, the mode ProbeContainment chose
// (why: its error); nil for a mode not known here.
func (c Containment) Lines(why error) []ModeLine {
	m := modeNamed(c)
	if m == nil || m.doctor == nil {
		return nil
	}
	lines := slices.Clone(m.doctor)
	if m.doctorWhy && why != nil {
		lines[0].Detail += " (" + why.Error() + ")"
	}
	return lines
}

// KeeperArg is the hidden first argument that makes amdrun the keeper of a
// job's PID namespace; main hands such a command line to KeeperMain first.
const KeeperArg = "__amdrun_keeper"
