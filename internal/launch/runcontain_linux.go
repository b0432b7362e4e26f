package launch

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// contain sets up the containment o.Contain asks for (see Containment):
// the keeper of the job's namespaces when permitted (or required): PID
// and mount namespaces as root, a user namespace too where the kernel
// permits one; else amdrun as a subreaper for the guards.
func (s *supervisor) contain() error {
	switch s.o.Contain {
	case ContainAuto, ContainPIDNamespace:
		k, err := startKeeper(s.o.Self, s.o.Hold, s.errs.dir, false)
		if err == nil {
			s.keeper, s.mode = k, ContainPIDNamespace
			return nil
		}
		if s.o.Contain == ContainPIDNamespace {
			return fmt.Errorf("launch: %w: %w", ErrContainment, err)
		}
		if s.userNamespace() == nil {
			return nil
		}
		return s.subreaper()
	case ContainUserNamespace:
		if err := s.userNamespace(); err != nil {
			return fmt.Errorf("launch: %w: %w", ErrContainment, err)
		}
		return nil
	case ContainSubreaper:
		return s.subreaper()
	}
	return fmt.Errorf("launch: unknown containment %q", string(s.o.Contain))
}

// userNamespace starts the keeper of a user, PID and mount namespace for
// the job (ContainUserNamespace).
func (s *supervisor) userNamespace() error {
	k, err := startKeeper(s.o.Self, s.o.Hold, s.errs.dir, true)
	if err != nil {
		return err
	}
	s.keeper, s.mode = k, ContainUserNamespace
	return nil
}

// subreaper chooses ContainSubreaper: amdrun becomes a child subreaper
// for the job's run, so that a rank whose guard dies comes to amdrun, to
// be killed (sweepOrphans). The children amdrun has now are not the
// job's.
func (s *supervisor) subreaper() error {
	s.mode = ContainSubreaper
	s.guardsOnly()
	was, err := isSubreaper()
	if err != nil {
		return nil // the guards alone, as before issue 26
	}
	if !was {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return nil
		}
		s.unsetSubreaper = true
	}
	s.reaping = true
	s.notJob = map[int]bool{}
	for _, c := range childrenNow(os.Getpid()) {
		s.notJob[c] = true
	}
	return nil
}

// guardsOnly is what amdrun does when the guards alone contain the job:
// it makes itself not dumpable, so that no rank can ptrace it or copy its
// lease descriptors with pidfd_getfd (issue 36.4), and, when it holds
// device leases (other users' jobs may wait for them), says in one line
// what a job can still do.
func (s *supervisor) guardsOnly() {
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	if len(s.o.Hold) == 0 {
		return
	}
	why := "no user namespace here"
	if s.o.Contain == ContainSubreaper {
		why = "--contain subreaper"
	}
	s.note(fmt.Sprintf(guardsOnlyNotice, why))
}

// guardsOnlyNotice is guardsOnly's line, with why (docs/shared-nodes.md
// quotes it).
const guardsOnlyNotice = "amdrun: warning: only the guards contain this job (%s): a rank that kills both its guard and amdrun, or stops amdrun and kills its guard, lives on after the lease is let go; root can permit user namespaces (see amdrun doctor)\n"

// isSubreaper says whether this process is a child subreaper already.
func isSubreaper() (bool, error) {
	var v int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0); err != nil {
		return false, err
	}
	return v != 0, nil
}

// uncontain ends the containment: it waits until the job's namespace is
// empty, or, as the subreaper, kills and reaps whatever of the job came to
// amdrun. Only then does Run return and the caller let the lease go.
func (s *supervisor) uncontain() {
	if s.keeper != nil {
		s.keeper.close()
	}
	if s.reaping {
		s.sweepOrphans(nil)
		if s.unsetSubreaper {
			_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
		}
	}
}

// sweepOrphans kills, as the subreaper, every process that came to amdrun
// from a guard that died (amdrun's children but the guards in live and
// those it had before the job) and everything they started, round after
// round until none is left, and reaps them. It returns how many it
// killed.
func (s *supervisor) sweepOrphans(live map[int]bool) int {
	killed := map[int]bool{}
	for {
		var orphans []int
		for _, c := range childrenNow(os.Getpid()) {
			if !live[c] && !s.notJob[c] {
				orphans = append(orphans, c)
			}
		}
		if len(orphans) == 0 {
			return len(killed)
		}
		for _, o := range orphans {
			for _, d := range descendants(o) {
				killed[d] = true
				_ = unix.Kill(d, unix.SIGKILL)
			}
			killed[o] = true
			_ = unix.Kill(o, unix.SIGKILL)
		}
		for _, o := range orphans {
			// Its own pid: the guards' exec.Cmds wait for theirs.
			var ws unix.WaitStatus
			for {
				if _, err := unix.Wait4(o, &ws, 0, nil); err != unix.EINTR {
					break
				}
			}
		}
	}
}
