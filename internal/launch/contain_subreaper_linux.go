package launch

import (
	"fmt"
	"os"
	"os/exec"
	"unsafe"

	"golang.org/x/sys/unix"
)

// subreaper is ContainSubreaper: the guards, and amdrun a subreaper while
// the job runs, so a rank whose guard was killed comes to amdrun.
type subreaper struct {
	hold   []*os.File
	unset  bool         // amdrun was not a subreaper before
	notJob map[int]bool // amdrun's children from before the job; nil: amdrun is not the job's subreaper
}

func init() {
	register(containMode{name: ContainSubreaper, auto: 1, open: openSubreaper,
		doctorWhy: true, doctor: []ModeLine{
			{"containment", "subreaper: a guard per rank kills what the rank leaves",
				"weaker than a namespace: the job itself, or another process of the same user, that kills or stops both amdrun and a guard frees that guard's rank, which lives on after the lease is let go; run as root, or let the kernel permit user namespaces"},
			{"guards", "amdrun and the guards are not dumpable (no ptrace, no pidfd_getfd by the job's user); a rank whose guard is killed comes to amdrun, which kills it and all it started while amdrun runs", ""},
			{"lease hold", "released once amdrun has killed and reaped every process of the job that came to it", ""},
		}})
}

// openSubreaper makes amdrun a child subreaper for the run and not
// dumpable (no pidfd_getfd of its leases; issue 36.4). It never fails:
// where amdrun cannot be one the guards alone contain the job.
func openSubreaper(o containOpts) (container, error) {
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	if len(o.hold) > 0 {
		why := "no user namespace here"
		if o.asked {
			why = "--contain subreaper"
		}
		o.note(fmt.Sprintf(guardsOnlyNotice, why))
	}
	s := &subreaper{hold: o.hold}
	var was int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&was)), 0, 0, 0); err != nil {
		return s, nil
	}
	if was == 0 {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return s, nil
		}
		s.unset = true
	}
	s.notJob = map[int]bool{}
	for _, c := range childrenNow(os.Getpid()) {
		s.notJob[c] = true
	}
	return s, nil
}

// guardsOnlyNotice is openSubreaper's line, with why (docs/shared-nodes.md
// quotes it).
const guardsOnlyNotice = "amdrun: warning: only the guards contain this job (%s): a rank that kills both its guard and amdrun, or stops amdrun and kills its guard, lives on after the lease is let go; root can permit user namespaces (see amdrun doctor)\n"

func (s *subreaper) guardHeld() []*os.File { return s.hold }

func (s *subreaper) startGuard(cmd *exec.Cmd) (int, error) { return 0, cmd.Start() }

func (s *subreaper) outerPID(_, pid int) int { return pid }

func (s *subreaper) guardLost(guard string, live map[int]bool) string {
	if s.notJob == nil {
		return guard + "; the rank's processes may live on (amdrun could not be their subreaper)"
	}
	return fmt.Sprintf("%s; amdrun killed the rank and all it started (%d processes)", guard, s.sweepOrphans(live))
}

// close kills and reaps what of the job came to amdrun, and unsets reaping.
func (s *subreaper) close() {
	if s.notJob == nil {
		return
	}
	s.sweepOrphans(nil)
	if s.unset {
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	}
}

// sweepOrphans kills and reaps every child but the guards in live and
// those from before the job, and all they started; it returns how many.
func (s *subreaper) sweepOrphans(live map[int]bool) int {
	killed := map[int]bool{}
	for {
		orphans := killStrays(func(c int) bool { return live[c] || s.notJob[c] }, killed)
		if len(orphans) == 0 {
			return len(killed)
		}
		for _, o := range orphans { // by pid: the guards' exec.Cmds wait for theirs
			var ws unix.WaitStatus
			for {
				if _, err := unix.Wait4(o, &ws, 0, nil); err != unix.EINTR {
					break
				}
			}
		}
	}
}
