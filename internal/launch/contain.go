package launch

import (
	"errors"
	"fmt"
	"strings"
)

// Containment is how Run keeps every process a job starts from outliving
// the job, however amdrun itself ends (issue 13).
//
// Every rank always runs under a guard: amdrun re-executed as a child
// subreaper (PR_SET_CHILD_SUBREAPER) that starts the rank, relays amdrun's
// signals to it, and, when the rank exits or amdrun goes away (its end of
// a pipe closes, which the kernel does however amdrun dies), SIGKILLs
// every descendant the rank left, wherever it went (another process group,
// setsid, a double fork: orphans come back to the guard), reaps them and
// only then exits. The guards keep the device leases' lock files open, so
// the devices stay leased until the last process of the job is gone.
//
// ContainPIDNamespace adds a PID namespace (and a mount namespace with its
// own /proc) for the whole job, whose init is a keeper process: when
// amdrun goes away the keeper kills every process of the namespace and
// exits once the namespace is empty, and if the keeper itself is killed
// the kernel kills them all. It needs CAP_SYS_ADMIN (root).
type Containment string

// The containment modes.
const (
	// ContainAuto is the strongest mode permitted here: ContainPIDNamespace
	// when amdrun may create namespaces, else ContainSubreaper.
	ContainAuto Containment = ""
	// ContainPIDNamespace runs the job in its own PID and mount
	// namespaces, with a keeper as their init, plus the per-rank guards.
	ContainPIDNamespace Containment = "pid-namespace"
	// ContainSubreaper runs each rank under its guard only. It is weaker:
	// a guard that is itself SIGKILLed (the OOM killer, `pkill -9 amdrun`)
	// takes its rank with it (parent-death signal) but not the rank's
	// other descendants.
	ContainSubreaper Containment = "subreaper"
)

// ErrContainment is wrapped by Run's error when the containment asked for
// (ContainPIDNamespace) is not permitted here.
var ErrContainment = errors.New("cannot contain the job in a PID namespace")

// ParseContainment parses "auto", "pid-namespace" or "subreaper" (any
// case). Another value gives an error that lists the valid ones.
func ParseContainment(s string) (Containment, error) {
	switch c := Containment(strings.ToLower(strings.TrimSpace(s))); c {
	case "auto":
		return ContainAuto, nil
	case ContainPIDNamespace, ContainSubreaper:
		return c, nil
	}
	return "", fmt.Errorf("contain: unknown mode %q (valid: auto, pid-namespace, subreaper)", s)
}

// String names the mode as --contain spells it.
func (c Containment) String() string {
	if c == ContainAuto {
		return "auto"
	}
	return string(c)
}

// KeeperArg is the hidden first argument that makes amdrun act as the
// keeper of a job's PID namespace (`amdrun __amdrun_keeper`). The main
// function must hand such a command line to KeeperMain before doing
// anything else, as it does ShimArg to ShimMain.
const KeeperArg = "__amdrun_keeper"
