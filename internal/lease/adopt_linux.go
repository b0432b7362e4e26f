package lease

import (
	"cmp"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// adoption is lease init taking over the directory jobs made in the
// degraded mode (issue 31). All it judged stays open and write-locked
// until close, so that no job leases or queues meanwhile.
type adoption struct {
	dfd    int
	path   string
	locked map[string]lockedEntry // the directory's entries, by name
	queue  *lockedEntry           // DIR/queue (fd: the directory), nil if none
	queued map[string]int         // the queue's tickets, locked, by name
	proof  bool                   // the node lock or a lease file is there
}

type lockedEntry struct {
	fd int
	st unix.Stat_t
}

func (a *adoption) close() {
	for _, e := range a.locked {
		unix.Close(e.fd)
	}
	for _, fd := range a.queued {
		unix.Close(fd)
	}
	if a.queue != nil {
		unix.Close(a.queue.fd)
	}
}

// adoptDegraded makes root's, 0755, the world-writable directory dfd (st)
// when it can prove it amdrun's and no job holds a lock there
// (docs/shared-nodes.md); other users' files are replaced, never changed
// in place. Else it refuses (notOurs, or ErrBusy naming a holder).
func adoptDegraded(dfd int, abs string, st *unix.Stat_t, rep *InitReport) error {
	a := &adoption{dfd: dfd, path: abs, locked: map[string]lockedEntry{}, queued: map[string]int{}}
	defer a.close()
	if hasACL(dfd) {
		return notOurs(abs, st, "it carries an access control list, which amdrun never sets")
	}
	if why, err := a.survey(); err != nil || why != "" {
		return refusal(abs, st, why, err)
	}
	if err := unix.Fchown(dfd, 0, 0); err != nil {
		return fmt.Errorf("lease: %w", &fs.PathError{Op: "chown", Path: abs, Err: err})
	}
	if err := unix.Fchmod(dfd, 0o755); err != nil {
		a.restore(st)
		return fmt.Errorf("lease: %w", &fs.PathError{Op: "chmod", Path: abs, Err: err})
	}
	if afterSeize != nil {
		afterSeize(abs)
	}
	// Entries added or replaced between the survey and the chmod.
	if why, err := a.survey(); err != nil || why != "" {
		a.restore(st)
		return refusal(abs, st, why, err)
	}
	replaced, err := a.replaceOthers()
	if err != nil {
		return err
	}
	stale, err := a.replaceQueue()
	if err != nil {
		return err
	}
	rep.Adopted = fmt.Sprintf("adopted the directory jobs made in the degraded mode (owner %s, mode %04o): now root's, 0755; %d lock files other users made replaced by root's, %d stale queue tickets removed",
		ownerName(int(st.Uid)), st.Mode&0o7777, replaced, stale)
	return nil
}

// afterSeize, when set (tests), runs before the second survey.
var afterSeize func(path string)

// refusal is err, else why as notOurs says it, else nil.
func refusal(abs string, st *unix.Stat_t, why string, err error) error {
	if err != nil || why == "" {
		return err
	}
	return notOurs(abs, st, why)
}

// hasACL says whether fd carries a POSIX ACL (or its xattrs are unreadable).
func hasACL(fd int) bool {
	buf := make([]byte, 4096)
	n, err := unix.Flistxattr(fd, buf)
	if err == unix.ENOTSUP {
		return false
	}
	return err != nil || strings.Contains(string(buf[:n]), "system.posix_acl_")
}

func (a *adoption) restore(st *unix.Stat_t) {
	_ = unix.Fchown(a.dfd, int(st.Uid), int(st.Gid))
	_ = unix.Fchmod(a.dfd, st.Mode&0o7777)
}

// survey judges and locks every entry not judged yet (why: what is not ours).
func (a *adoption) survey() (why string, err error) {
	ents, err := names(a.dfd, a.path)
	if err != nil {
		return "", err
	}
	for _, n := range ents {
		if e, ok := a.locked[n]; ok || (n == queueDir && a.queue != nil) {
			if !ok {
				e = *a.queue
			}
			if !stillNamed(a.dfd, n, &e.st) {
				return fmt.Sprintf("%s was replaced while lease init looked at it", n), nil
			}
			continue
		}
		if n == queueDir {
			why, err = a.surveyQueue()
		} else {
			why, err = a.take(n)
		}
		if why != "" || err != nil {
			return why, err
		}
	}
	if !a.proof {
		return "it holds neither amdrun's node lock nor a lease file", nil
	}
	return "", nil
}

func (a *adoption) take(n string) (why string, err error) {
	_, isKey := KeyFromFileName(n)
	if !isKey && n != nodeLock && n != initMarker && !strings.HasPrefix(n, noticePrefix) {
		return fmt.Sprintf("it holds files amdrun does not make (%s)", n), nil
	}
	e, why, err := lockEntry(a.dfd, a.path, n, 0)
	if why != "" || err != nil {
		return why, err
	}
	a.locked[n] = e
	a.proof = a.proof || isKey || n == nodeLock
	return "", nil
}

// lockEntry opens (following no link) and write-locks the entry n of dfd:
// a regular file with one link of at most limit bytes (why: what it is).
func lockEntry(dfd int, path, n string, limit int64) (e lockedEntry, why string, err error) {
	full := filepath.Join(path, n)
	fd, err := unix.Openat(dfd, n, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return e, fmt.Sprintf("%s cannot be opened as amdrun's file: %v", n, err), nil
	}
	e.fd = fd
	if err := unix.Fstat(fd, &e.st); err != nil || fileKind(e.st.Mode) != "" || e.st.Nlink != 1 || e.st.Size > limit {
		unix.Close(fd)
		return e, fmt.Sprintf("%s is not a file amdrun makes (%s of %d bytes owned by %s)", n, cmp.Or(fileKind(e.st.Mode), "a regular file"), e.st.Size, ownerName(int(e.st.Uid))), nil
	}
	got, err := flockNB(fd, unix.LOCK_EX)
	if err != nil || !got {
		unix.Close(fd)
		if err == nil {
			err = &heldError{fmt.Sprintf("lease: %s is locked by %s, a job that runs or waits there; lease init changes nothing there: run it again once the job ends (amdrun ps lists the jobs)", full, lockHolder(readProcLocks(), new(lockNames).id(dfd, &e.st)))}
		}
		return e, "", err
	}
	return e, "", nil
}

// heldError is lockEntry's error for a file a process holds locked.
type heldError struct{ msg string }

func (e *heldError) Error() string { return e.msg }
func (e *heldError) Unwrap() error { return ErrBusy }

func (a *adoption) surveyQueue() (why string, err error) {
	qfd, err := unix.Openat(a.dfd, queueDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Sprintf("%s is not amdrun's queue: %v", queueDir, err), nil
	}
	a.queue = &lockedEntry{fd: qfd}
	if err := unix.Fstat(qfd, &a.queue.st); err != nil {
		return "", fmt.Errorf("lease: %w", &fs.PathError{Op: "stat", Path: filepath.Join(a.path, queueDir), Err: err})
	}
	qpath := filepath.Join(a.path, queueDir)
	ents, err := names(qfd, qpath)
	if err != nil {
		return "", err
	}
	for _, n := range ents {
		if !isTicketName(n) {
			return fmt.Sprintf("its queue holds files amdrun does not make (%s)", n), nil
		}
		e, why, err := lockEntry(qfd, qpath, n, maxTicket)
		if why != "" || err != nil {
			return why, err
		}
		a.queued[n] = e.fd
	}
	return "", nil
}

// isTicketName says whether Ticket.make gives n (ticketFile, or its tmp name).
func isTicketName(n string) bool {
	var uid, pid int
	var start, ino uint64
	if k, _ := fmt.Sscanf(n, "%d-%d-%d-%d.lock", &uid, &pid, &start, &ino); k == 4 && ticketFile(uid, pid, start, ino) == n {
		return true
	}
	var r uint64
	k, _ := fmt.Sscanf(n, "%d-%d-%d.new-%x", &uid, &pid, &start, &r)
	return k == 4 && n == fmt.Sprintf("%d-%d-%d.new-%016x", uid, pid, start, r)
}

// replaceOthers replaces the lock files not root's 0644 by root's and
// removes the notice markers; it counts the files replaced.
func (a *adoption) replaceOthers() (int, error) {
	n := 0
	for name, e := range a.locked {
		mine := e.st.Uid == 0 && e.st.Mode&0o7777 == 0o644
		notice := strings.HasPrefix(name, noticePrefix)
		if mine && !notice {
			continue
		}
		if err := unix.Unlinkat(a.dfd, name, 0); err != nil && err != unix.ENOENT {
			return n, fmt.Errorf("lease: %w", &fs.PathError{Op: "remove", Path: filepath.Join(a.path, name), Err: err})
		}
		if notice {
			continue
		}
		if _, err := ensureLockFile(a.dfd, filepath.Join(a.path, name), name, true); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// replaceQueue removes a queue another user made, with its stale tickets.
func (a *adoption) replaceQueue() (int, error) {
	if a.queue == nil || a.queue.st.Uid == 0 {
		return 0, nil
	}
	qpath := filepath.Join(a.path, queueDir)
	for name := range a.queued {
		if err := unix.Unlinkat(a.queue.fd, name, 0); err != nil {
			return 0, fmt.Errorf("lease: %w", &fs.PathError{Op: "remove", Path: filepath.Join(qpath, name), Err: err})
		}
	}
	if err := unix.Unlinkat(a.dfd, queueDir, unix.AT_REMOVEDIR); err != nil {
		return 0, fmt.Errorf("lease: %s: %w: %w; lease init made the rest root's: remove what is in it and run lease init again", qpath, ErrUnsafe, err)
	}
	return len(a.queued), nil
}
