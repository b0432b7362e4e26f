package lease

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The queue is DIR/queue, a sticky directory every user can write. A
// ticket is a file named <CLOCK_MONOTONIC ns>-<pid>.lock, locked by its
// waiter for as long as it waits and holding {"need":N}, the number of
// devices the waiter wants. Anyone can make a file there, so a ticket
// counts only while it is locked, and only for as long as it could
// plausibly be waiting: a waiter defers to an older ticket while fewer
// than its need of devices are free, and for Patience in all (one clock
// per waiter, however many tickets are ahead) once enough are; after that
// a ticket that lets enough free devices go by is stalled or fake and is
// passed over.

// maxTicket bounds what is read of a ticket.
const maxTicket = 64

// openQueue opens DIR/queue, making it (01777) when missing and this
// process may make files in the directory. It refuses a symlink or a
// non-directory there.
func (d *Dir) openQueue() (int, error) {
	qpath := filepath.Join(d.path, queueDir)
	if d.fd < 0 {
		return -1, fmt.Errorf("lease: lease directory %s does not exist", d.path)
	}
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	qfd, err := unix.Openat(d.fd, queueDir, flags, 0)
	if err == unix.ENOENT && d.mayCreate() {
		made := unix.Mkdirat(d.fd, queueDir, 0o777)
		qfd, err = unix.Openat(d.fd, queueDir, flags, 0)
		var st unix.Stat_t
		if made == nil && err == nil && unix.Fstat(qfd, &st) == nil && int(st.Uid) == d.euid {
			// Mkdir's mode went through the umask and cannot set the sticky bit.
			_ = unix.Fchmod(qfd, 0o1777)
		}
	}
	if err == unix.ELOOP || err == unix.ENOTDIR {
		var st unix.Stat_t
		_ = unix.Fstatat(d.fd, queueDir, &st, unix.AT_SYMLINK_NOFOLLOW)
		return -1, fmt.Errorf("lease: %s: %w: %s owned by %s, not a directory", qpath, ErrUnsafe, fileKind(st.Mode), ownerName(int(st.Uid)))
	}
	if err != nil {
		return -1, fmt.Errorf("lease: %w", &fs.PathError{Op: "open", Path: qpath, Err: err})
	}
	return qfd, nil
}

// Enqueue joins the waiting queue in DIR/queue for need of total devices:
// it creates, fills and locks a ticket file, and only then gives it its
// final name, so a ticket that can be seen unlocked belongs to a dead
// waiter. Call Done when the wait is over. It fails when the queue cannot
// be used (not a directory, or one this user cannot write, such as a
// 0755 queue another user made); waiting can go on without it.
func (d *Dir) Enqueue(need, total int) (*Ticket, error) {
	qfd, err := d.openQueue()
	if err != nil {
		return nil, err
	}
	qpath := filepath.Join(d.path, queueDir)
	pid := os.Getpid()
	blob := fmt.Appendf(nil, "{\"need\":%d}\n", need)
	for range 10 {
		tmp := fmt.Sprintf(".tmp-%d-%d", pid, time.Now().UnixNano())
		fd, err := unix.Openat(qfd, tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err != nil {
			unix.Close(qfd)
			return nil, fmt.Errorf("lease: cannot join the queue: %w", &fs.PathError{Op: "create", Path: filepath.Join(qpath, tmp), Err: err})
		}
		drop := func() {
			unix.Close(fd)
			_ = unix.Unlinkat(qfd, tmp, 0)
		}
		// Readable by every waiter whatever the umask: an unreadable ticket
		// is ignored.
		_ = unix.Fchmod(fd, 0o644)
		if _, err := unix.Pwrite(fd, blob, 0); err != nil {
			drop()
			unix.Close(qfd)
			return nil, fmt.Errorf("lease: cannot join the queue: %w", err)
		}
		if ok, err := flockNB(fd, unix.LOCK_EX); !ok || err != nil {
			drop() // someone opened and locked our new file: take another
			continue
		}
		var ts unix.Timespec
		// CLOCK_MONOTONIC is one clock for every process on the node and
		// never jumps back, unlike the wall clock.
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			drop()
			unix.Close(qfd)
			return nil, fmt.Errorf("lease: %w", err)
		}
		name := fmt.Sprintf("%020d-%010d.lock", ts.Nano(), pid)
		err = unix.Renameat2(qfd, tmp, qfd, name, unix.RENAME_NOREPLACE)
		if err == unix.EINVAL || err == unix.ENOSYS { // file system without RENAME_NOREPLACE
			if err = unix.Linkat(qfd, tmp, qfd, name, 0); err == nil {
				_ = unix.Unlinkat(qfd, tmp, 0)
			}
		}
		if err == nil {
			return &Ticket{dir: d, name: name, need: need, total: total, patience: Patience, qfd: qfd, fd: fd}, nil
		}
		drop()
		if err != unix.EEXIST {
			unix.Close(qfd)
			return nil, fmt.Errorf("lease: cannot join the queue: %w", &fs.PathError{Op: "rename", Path: filepath.Join(qpath, tmp), Err: err})
		}
	}
	unix.Close(qfd)
	return nil, fmt.Errorf("lease: cannot name a ticket in %s", qpath)
}

func ticketName(n string) bool {
	if len(n) != 20+1+10+5 || !strings.HasSuffix(n, ".lock") || n[20] != '-' {
		return false
	}
	for i, c := range n[:31] {
		if i != 20 && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// First reports whether it is this ticket's turn to try to acquire,
// given how many devices are free now (neither held nor unusable). It
// defers to an older live ticket while that ticket's need exceeds free,
// and, once it does not, for the ticket's patience (Patience), counted
// once for all the tickets ahead from its first such deference; tickets of
// dead waiters are removed (when this user may), and files that are not
// tickets amdrun wrote (a need that is not 1 to total) are ignored.
// After Done it returns an error.
func (t *Ticket) First(free int) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fd < 0 {
		return false, fmt.Errorf("lease: ticket %s is done", t.name)
	}
	ents, err := names(t.qfd, filepath.Join(t.dir.path, queueDir))
	if err != nil {
		return false, err
	}
	var older []string
	for _, n := range ents {
		if ticketName(n) && n < t.name {
			older = append(older, n)
		} else if strings.HasPrefix(n, ".tmp-") {
			t.removeStaleTemp(n)
		}
	}
	slices.Sort(older)
	now := time.Now()
	for _, n := range older {
		need, live := t.probe(n)
		if !live || need < 1 || need > t.total {
			continue
		}
		if need > free {
			return false, nil // it waits for devices, as we do: its turn first
		}
		// Enough devices are free for it. The patience is this waiter's,
		// whatever the number of tickets ahead (issue 26: a timer per
		// ticket, started only when it was reached, let 10 fake tickets
		// delay a waiter 32 s): it starts the first time this waiter
		// defers to a ticket that could take free devices, and once it is
		// spent every such ticket is passed over as stalled or fake.
		if t.waitFrom.IsZero() {
			t.waitFrom = now
			return false, nil
		}
		if now.Sub(t.waitFrom) < t.patience {
			return false, nil
		}
	}
	return true, nil
}

// probe reports whether the ticket n is held by a live waiter and the
// need it declares (0 when it declares none). A ticket found unlocked
// belongs to a dead waiter and is removed when this user may.
func (t *Ticket) probe(n string) (need int, live bool) {
	fd, err := unix.Openat(t.qfd, n, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return 0, false // gone, unreadable or a symlink: not a waiter we can weigh
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, false
	}
	free, err := flockNB(fd, unix.LOCK_SH)
	if err != nil {
		return 0, false
	}
	if free {
		// A ticket is locked before it is named, so nobody can be about to
		// lock this one: its waiter is dead. Tidy up.
		_ = unix.Unlinkat(t.qfd, n, 0)
		return 0, false
	}
	buf := make([]byte, maxTicket)
	k, _ := unix.Pread(fd, buf, 0)
	var c struct {
		Need int `json:"need"`
	}
	if k <= 0 || json.Unmarshal(buf[:k], &c) != nil {
		return 0, true
	}
	return c.Need, true
}

// removeStaleTemp removes a ticket left half-made by a waiter that died
// between creating and naming it; only minutes-old ones, so as not to race
// a waiter that is naming it right now.
func (t *Ticket) removeStaleTemp(n string) {
	var st unix.Stat_t
	if unix.Fstatat(t.qfd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return
	}
	if time.Since(time.Unix(st.Mtim.Unix())) < time.Minute {
		return
	}
	fd, err := unix.Openat(t.qfd, n, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	if free, err := flockNB(fd, unix.LOCK_SH); err == nil && free {
		_ = unix.Unlinkat(t.qfd, n, 0)
	}
	unix.Close(fd)
}

// Done leaves the queue. Calling it again does nothing.
func (t *Ticket) Done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fd < 0 {
		return
	}
	// Unlink while still locked, so nobody sees the file free and alive.
	_ = unix.Unlinkat(t.qfd, t.name, 0)
	unix.Close(t.fd)
	unix.Close(t.qfd)
	t.fd, t.qfd = -1, -1
}
