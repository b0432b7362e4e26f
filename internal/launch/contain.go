package launch

import (
	"errors"
	"fmt"
	"strings"
)

// Containment is how Run keeps every process a job starts from outliving
// the job, however amdrun itself ends (issue 13), and how it keeps the
// job from undoing that (issue 26).
//
// Every rank always runs under a guard: amdrun re-executed as a child
// subreaper (PR_SET_CHILD_SUBREAPER) that starts the rank, relays amdrun's
// signals to it, and, when the rank exits or amdrun goes away (its end of
// a pipe closes, which the kernel does however amdrun dies), SIGKILLs
// every descendant the rank left, wherever it went (another process group,
// setsid, a double fork: orphans come back to the guard), reaps them and
// only then exits. A guard is not dumpable (PR_SET_DUMPABLE 0), so that a
// process of the same user cannot ptrace it. The guards keep the device
// leases' lock files open, and amdrun keeps its own until every process
// of the job is gone, so the devices stay leased to the end.
//
// The modes differ in what a job (or another process of the same user)
// can undo:
//
//   - ContainPIDNamespace (root): one PID and mount namespace for the
//     whole job, whose init is a keeper process; the guards run in it.
//     When amdrun goes away the keeper kills every process of the
//     namespace and exits once it is empty; if the keeper itself is
//     killed the kernel kills them all. A rank whose guard is killed
//     comes to the keeper, which amdrun has kill it.
//   - ContainUserNamespace (unprivileged, where the kernel permits user
//     namespaces): the same for the job inside a user namespace of its
//     own, whose keeper starts the guards (amdrun, multithreaded, cannot
//     enter a user namespace). The job cannot signal the keeper (the
//     kernel drops SIGKILL and SIGSTOP sent to a namespace's init from
//     inside; the keeper ignores or drops every other signal), holds no
//     capability on the thread it forks guards from, and a rank whose
//     guard dies comes to the keeper, which kills it at once. Another
//     process of the user outside the job can ptrace, stop or kill the
//     keeper and the guards: the namespace is the user's.
//   - ContainSubreaper (guards only, where neither is permitted): amdrun
//     is itself a subreaper while the job runs, so a rank whose guard was
//     killed comes to amdrun, which kills it and all it started before it
//     reports or lets the lease go; amdrun is not dumpable either. What
//     this cannot cover: the job itself, or another process of the same
//     user, that kills or stops both amdrun and a guard frees that
//     guard's rank, which lives on after the lease is let go (Run warns
//     so when it holds device leases).
type Containment string

// The containment modes.
const (
	// ContainAuto is the strongest mode permitted here:
	// ContainPIDNamespace when amdrun may create namespaces as root, else
	// ContainUserNamespace when the kernel lets it create a user
	// namespace, else ContainSubreaper.
	ContainAuto Containment = ""
	// ContainPIDNamespace runs the job in its own PID and mount
	// namespaces, with a keeper as their init, plus the per-rank guards.
	ContainPIDNamespace Containment = "pid-namespace"
	// ContainUserNamespace runs the job in its own user, PID and mount
	// namespaces, with a keeper as their init, plus the per-rank guards.
	ContainUserNamespace Containment = "user-namespace"
	// ContainSubreaper runs each rank under its guard only, with amdrun a
	// subreaper for the guards that die.
	ContainSubreaper Containment = "subreaper"
)

// ErrContainment is wrapped by Run's error when the containment asked for
// (ContainPIDNamespace, ContainUserNamespace) is not permitted here.
var ErrContainment = errors.New("cannot contain the job in the namespaces asked for")

// ParseContainment parses "auto", "pid-namespace", "user-namespace" or
// "subreaper" (any case). Another value gives an error that lists the valid ones.
func ParseContainment(s string) (Containment, error) {
	switch c := Containment(strings.ToLower(strings.TrimSpace(s))); c {
	case "auto":
		return ContainAuto, nil
	case ContainPIDNamespace, ContainUserNamespace, ContainSubreaper:
		return c, nil
	}
	return "", fmt.Errorf("contain: unknown mode %q (valid: auto, pid-namespace, user-namespace, subreaper)", s)
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
