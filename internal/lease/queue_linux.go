package lease

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The queue is DIR/queue, every user's to write, so nothing in it is
// believed for being there; tickets and how waiters find them:
// docs/shared-nodes.md, "The queue".

// maxTicket bounds what is read of a ticket.
const maxTicket = 64

// openQueue opens DIR/queue, making it (01777) when missing and this
// process may; a symlink or non-directory is refused.
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
			// Mkdir's mode went through the umask and has no sticky bit.
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

func ticketFile(uid, pid int, start, ino uint64) string {
	return fmt.Sprintf("%d-%d-%d-%d.lock", uid, pid, start, ino)
}

// maxJoinTries bounds the names a join tries: each is a fresh inode.
const maxJoinTries = 8

// selfStart is this process's start time in clock ticks after boot.
func selfStart() (uint64, error) {
	b, err := readProcFile("/proc/self/stat", 64<<10)
	t, ok := startTicks(b)
	if !ok && err == nil {
		err = errors.New("cannot read the start time in /proc/self/stat")
	}
	return t, err
}

// Enqueue joins the queue for need of total devices with this process's
// ticket; call Done when the wait is over. It fails wrapping ErrQueueFull
// when this user has MaxTicketsPerUser tickets there (do not wait), and
// otherwise when the queue cannot be used (waiting can go on without it).
func (d *Dir) Enqueue(need, total int) (*Ticket, error) {
	if _, err := os.Stat("/proc/locks"); err != nil {
		return nil, fmt.Errorf("lease: the queue needs /proc/locks: %w", err)
	}
	qfd, err := d.openQueue()
	if err != nil {
		return nil, err
	}
	t := &Ticket{dir: d, need: need, total: total, now: time.Now, charged: map[ticketKey]time.Duration{}, qfd: qfd, fd: -1, pid: os.Getpid()}
	if err := t.join(); err != nil {
		unix.Close(qfd)
		return nil, err
	}
	return t, nil
}

func (t *Ticket) join() error {
	if err := t.room(); err != nil {
		return err
	}
	start, err := selfStart()
	if err != nil {
		return fmt.Errorf("lease: cannot join the queue: %w", err)
	}
	for range maxJoinTries {
		if err := t.make(start); err != unix.EEXIST {
			return err
		}
	}
	return fmt.Errorf("lease: cannot join the queue: %d names taken in %s by files of other users", maxJoinTries, filepath.Join(t.dir.path, queueDir))
}

// make makes, fills and locks one ticket under a random name and renames
// it to the name its inode gives; unix.EEXIST when that is taken.
func (t *Ticket) make(start uint64) error {
	qpath := filepath.Join(t.dir.path, queueDir)
	var r [8]byte
	_, _ = rand.Read(r[:])
	tmp := fmt.Sprintf("%d-%d-%d.new-%x", t.dir.euid, t.pid, start, r)
	fd, err := unix.Openat(t.qfd, tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("lease: cannot join the queue: %w", &fs.PathError{Op: "create", Path: filepath.Join(qpath, tmp), Err: err})
	}
	// Readable by every waiter whatever the umask, or it does not count.
	_ = unix.Fchmod(fd, 0o644)
	blob := fmt.Appendf(nil, "{\"need\":%d}\n", t.need)
	var st unix.Stat_t
	_, werr := unix.Pwrite(fd, blob, 0)
	ok, lerr := flockNB(fd, unix.LOCK_EX)
	if werr != nil || lerr != nil || !ok || unix.Fstat(fd, &st) != nil {
		unix.Close(fd)
		_ = unix.Unlinkat(t.qfd, tmp, 0)
		return fmt.Errorf("lease: cannot join the queue: %s: write %v, lock %v", filepath.Join(qpath, tmp), werr, lerr)
	}
	name := ticketFile(t.dir.euid, t.pid, start, st.Ino)
	if err := unix.Renameat2(t.qfd, tmp, t.qfd, name, unix.RENAME_NOREPLACE); err != nil {
		unix.Close(fd)
		_ = unix.Unlinkat(t.qfd, tmp, 0)
		if err == unix.EEXIST {
			return err
		}
		return fmt.Errorf("lease: cannot join the queue: %w", &os.LinkError{Op: "rename", Old: filepath.Join(qpath, tmp), New: name, Err: err})
	}
	_ = unix.Fstat(fd, &st)
	t.name, t.fd = name, fd
	t.since = time.Unix(st.Ctim.Unix())
	return nil
}

// scan finds the tickets the kernel vouches for in locks, this process's
// excluded, in no order; past a first look nothing is read for a ticket
// behind (issue 36.7). /proc/locks, read a page at a time, can miss a lock
// (TestQueueAtScale): a first look reads it twice, and missed keeps a
// known ticket a read left out.
func (t *Ticket) scan(locks []procLock) []Waiting {
	var qst unix.Stat_t
	if unix.Fstat(t.qfd, &qst) != nil {
		return nil
	}
	if t.seen == nil {
		locks = append(locks[:len(locks):len(locks)], readProcLocks()...)
	}
	q := t.queueID(&qst)
	inodes := map[int][]uint64{} // pid -> write-locked inodes on the queue's file system
	for _, l := range locks {
		if l.write && l.pid > 0 && l.pid != t.pid && l.major == q.major && l.minor == q.minor && !slices.Contains(inodes[l.pid], l.ino) {
			inodes[l.pid] = append(inodes[l.pid], l.ino)
		}
	}
	t.stats = scanStats{}
	known := map[ticketKey]Waiting{}
	for pid, inos := range inodes {
		if w, ok := t.ticket(pid, inos); ok {
			known[ticketKey{pid, w.ino}] = w
		}
	}
	for k, w := range t.known {
		if _, ok := known[k]; !ok && t.missed(w) {
			known[k] = w
		}
	}
	t.known = known
	return slices.Collect(maps.Values(known))
}

// missed reports whether w, a ticket this look's read did not list, is
// ahead of this waiter and still locked by its live waiter.
func (t *Ticket) missed(w Waiting) bool {
	if t.seen == nil || !t.older(w) {
		return false
	}
	fd, err := unix.Openat(t.qfd, w.file, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return false // gone: it left the queue
	}
	defer unix.Close(fd) // and so the probe's lock
	var st unix.Stat_t
	if free, err := flockNB(fd, unix.LOCK_SH); err != nil || free || unix.Fstat(fd, &st) != nil || st.Ino != w.ino {
		return false
	}
	_, ok := t.ticketOf(w.PID, []uint64{w.ino})
	return ok
}

// queueID is the queue directory qst as /proc/locks names it.
func (t *Ticket) queueID(qst *unix.Stat_t) fileID {
	if qst.Dev == t.dir.dev {
		return t.dir.id(qst)
	}
	return t.names.id(t.qfd, qst)
}

// ticket is pid's ticket (one of inos) as a look finds it: read at a
// first look, later only a known one ahead (looked up again); a known one
// behind is kept as it was, an unknown one (new, so behind) skipped.
func (t *Ticket) ticket(pid int, inos []uint64) (Waiting, bool) {
	first := t.seen == nil
	if !first {
		i := slices.IndexFunc(inos, func(ino uint64) bool { _, ok := t.known[ticketKey{pid, ino}]; return ok })
		if i < 0 {
			return Waiting{}, false
		}
		if w := t.known[ticketKey{pid, inos[i]}]; !t.older(w) {
			return w, true
		}
	}
	t.stats.pids++
	for _, ino := range inos {
		// One the last look verified, still the file it was (by inode, not
		// device: see lockNames).
		if w, ok := t.known[ticketKey{pid, ino}]; ok {
			if _, ok := t.lookup(w.file, w.UID, ino); ok {
				return w, true
			}
		}
	}
	if !first {
		return Waiting{}, false
	}
	return t.ticketOf(pid, inos)
}

// older reports whether w, dated as this waiter saw it lock, is ahead.
func (t *Ticket) older(w Waiting) bool {
	if at := t.seen[w.key()]; at.After(w.Since) {
		w.Since = at
	}
	return w.before(Waiting{PID: t.pid, Since: t.since})
}

// lookup reports whether name in the queue is a regular file of uid's
// with one link, inode ino.
func (t *Ticket) lookup(name string, uid int, ino uint64) (unix.Stat_t, bool) {
	t.stats.lookups++
	var st unix.Stat_t
	ok := unix.Fstatat(t.qfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil &&
		st.Mode&unix.S_IFMT == unix.S_IFREG && int(st.Uid) == uid && st.Nlink == 1 && st.Ino == ino
	return st, ok
}

// ticketOf looks up the one name pid's ticket would have (one of inos).
func (t *Ticket) ticketOf(pid int, inos []uint64) (Waiting, bool) {
	dir := "/proc/" + strconv.Itoa(pid)
	status, _ := readProcFile(dir+"/status", 64<<10)
	stat, _ := readProcFile(dir+"/stat", 64<<10)
	uid, ok := statusEUID(status)
	start, ok2 := startTicks(stat)
	if !ok || !ok2 {
		return Waiting{}, false
	}
	for _, ino := range inos {
		if w, ok := t.ticketAt(ticketFile(uid, pid, start, ino), uid, ino); ok {
			w.PID, w.UID, w.User = pid, uid, userName(uid)
			return w, true
		}
	}
	return Waiting{}, false
}

// ticketAt reads the ticket name: a regular file of uid's with one link,
// inode ino, holding what amdrun writes for this node.
func (t *Ticket) ticketAt(name string, uid int, ino uint64) (Waiting, bool) {
	st, ok := t.lookup(name, uid, ino)
	if !ok {
		return Waiting{}, false
	}
	fd, err := unix.Openat(t.qfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return Waiting{}, false
	}
	defer unix.Close(fd)
	var fst unix.Stat_t
	if unix.Fstat(fd, &fst) != nil || fst.Ino != st.Ino || fst.Dev != st.Dev {
		return Waiting{}, false
	}
	buf := make([]byte, maxTicket)
	k, _ := unix.Pread(fd, buf, 0)
	need, ok := parseTicket(buf[:max(k, 0)], t.total)
	if !ok {
		return Waiting{}, false // not a ticket amdrun wrote for this node
	}
	return Waiting{Need: need, Since: time.Unix(fst.Ctim.Unix()), ino: st.Ino, file: name}, true
}

// aged dates each ticket from its lock as far as this waiter knows: one
// locked since its last look is no older than that look (issue 36.5: a
// file made 125 s before its lock kept its place at once).
func (t *Ticket) aged(found []Waiting) []Waiting {
	now, first := t.now(), t.seen == nil
	seen := make(map[ticketKey]time.Time, len(found))
	for i, w := range found {
		k := w.key()
		at, ok := t.seen[k]
		if !ok {
			at = w.Since
			if !first {
				at = now
			}
		}
		seen[k] = at
		if at.After(w.Since) {
			found[i].Since = at
		}
	}
	t.seen = seen
	return found
}

// parseTicket reads a ticket's {"need":N}; ok only for 1 <= N <= total.
func parseTicket(b []byte, total int) (int, bool) {
	var c struct {
		Need int `json:"need"`
	}
	if len(b) == 0 || json.Unmarshal(b, &c) != nil || c.Need < 1 || c.Need > total {
		return 0, false
	}
	return c.Need, true
}

// ahead is the counting tickets older than this one, oldest first.
func (t *Ticket) ahead(locks []procLock) []Waiting {
	all := counting(t.aged(t.scan(locks)), MaxTicketsPerUser)
	n, _ := slices.BinarySearchFunc(all, Waiting{PID: t.pid, Since: t.since}, order)
	return all[:n]
}

// First reports whether it is this ticket's turn with free devices free,
// by the queue's rule (queue.go); an error after Done.
func (t *Ticket) First(free int) (bool, error) {
	return t.look(readProcLocks(), free, nil)
}

func (t *Ticket) look(locks []procLock, free int, leasing map[int]bool) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fd < 0 {
		return false, fmt.Errorf("lease: ticket %s is done", t.name)
	}
	ahead := t.ahead(locks)
	t.refund(ahead, leasing)
	spent := t.clock.spent
	ok, by := rule{Patience, Backfill}.turn(ahead, free, t.now(), &t.clock)
	t.front = t.clock.spent >= Patience || !slices.ContainsFunc(ahead, func(w Waiting) bool { return w.Need <= t.need })
	t.heldBy = by // in ahead, made for this look
	if d := t.clock.spent - spent; by != nil && d > 0 {
		t.charged[by.key()] += d
	}
	return ok, nil
}

// refund gives back the patience spent deferring to a ticket that left
// the queue holding leases (its pid in leasing): without it waiters deep
// in a queue started ahead of the head (TestQueueAtScale: 16 of 32 out of
// order). Fakes, which lease nothing, still cost one patience in all.
func (t *Ticket) refund(ahead []Waiting, leasing map[int]bool) {
	if len(t.charged) == 0 || leasing == nil {
		return
	}
	for k, c := range t.charged {
		if slices.ContainsFunc(ahead, func(w Waiting) bool { return w.key() == k }) {
			continue
		}
		if leasing[k.pid] {
			t.clock.spent -= c
		}
		delete(t.charged, k)
	}
}

// mayTry is a waiter's look without the node lock (issue 36.7). try: it
// could start (with idle, a waiter whose turn it is tries whatever the
// count). soon: look again next poll, else when a lease or ticket goes.
func (t *Ticket) mayTry(all []string, idle bool) (try, soon bool, err error) {
	locks := readProcLocks()
	free, leasing := t.dir.unlocked(all, locks)
	first, err := t.look(locks, free, leasing)
	by := t.HeldBy()
	try = first && (free >= t.need || idle)
	return try, try || by != nil && by.Need <= free, err
}

// leases reports whether a lease going could let this waiter start (no
// ticket ahead asks for as few, or patience spent), so that a lease
// file's close wakes only the front (issue 36.7: 256 waiters all woke).
func (t *Ticket) leases() bool {
	if t == nil {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.front
}

// rested: the waiter slept deferring to nobody; the next look counts no
// time before it.
func (t *Ticket) rested() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.clock.last.IsZero() {
		t.clock.last = t.now()
	}
}

// unlocked counts the lease files of keys no lock in locks holds (a
// missing one this process may make too) and lists the others' holders.
func (d *Dir) unlocked(keys []string, locks []procLock) (int, map[int]bool) {
	names, err := checkKeys(keys)
	if err != nil || d.fd < 0 {
		return 0, nil
	}
	n, leasing := 0, map[int]bool{}
	for _, name := range names {
		var st unix.Stat_t
		err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.ENOENT && d.mayCreate() || err == nil && fileKind(st.Mode) == "" && !lockers(locks, d.id(&st), leasing) {
			n++
		}
	}
	return n, leasing
}

// lockers reports whether a lock in locks is on id, adding its holders
// (pid 0: outside this PID namespace) to pids.
func lockers(locks []procLock, id fileID, pids map[int]bool) bool {
	found := false
	for _, l := range locks {
		if l.fileID == id {
			pids[l.pid], found = true, true
		}
	}
	return found
}

// HeldBy is the ticket the last First deferred to; nil if none.
func (t *Ticket) HeldBy() *Waiting {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.heldBy
}

// Done leaves the queue. Calling it again does nothing.
func (t *Ticket) Done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fd < 0 {
		return
	}
	// Unlinked while locked: nobody sees it free and alive.
	_ = unix.Unlinkat(t.qfd, t.name, 0)
	unix.Close(t.fd)
	unix.Close(t.qfd)
	t.fd, t.qfd = -1, -1
}

// QueueRoom is an ErrQueueFull when this user may not join the queue now.
func (d *Dir) QueueRoom(total int) error {
	if d.fd < 0 {
		return nil
	}
	if err := procSeesNode(); err != nil {
		return err
	}
	t := d.peek(total, os.Getpid())
	if t == nil {
		return nil
	}
	defer unix.Close(t.qfd)
	return t.room()
}

// peek is a look at the queue, as pid, without a ticket; nil without a
// queue (or a directory: fd -1 fails the open).
func (d *Dir) peek(total, pid int) *Ticket {
	qfd, err := unix.Openat(d.fd, queueDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	return &Ticket{dir: d, total: total, qfd: qfd, fd: -1, pid: pid}
}

// room is the user's limit, an ErrQueueFull once reached.
func (t *Ticket) room() error {
	mine := len(slices.DeleteFunc(t.scan(readProcLocks()), func(w Waiting) bool { return w.UID != t.dir.euid }))
	if mine >= MaxTicketsPerUser {
		return fmt.Errorf("lease: %w: %s already has %d jobs waiting for devices here (at most %d per user); wait for one to start, or stop one",
			ErrQueueFull, ownerName(t.dir.euid), mine, MaxTicketsPerUser)
	}
	return nil
}

// Queue lists the counting tickets, oldest first (none without a queue).
func (d *Dir) Queue(total int) []Waiting {
	t := d.peek(total, 0)
	if t == nil {
		return nil
	}
	defer unix.Close(t.qfd)
	return counting(t.scan(readProcLocks()), MaxTicketsPerUser)
}

// initPIDNamespace is the node's own PID namespace (PROC_PID_INIT_INO).
const initPIDNamespace = "pid:[4026531836]"

// procSeesNode fails in a PID namespace of its own whose /proc shows only
// it: /proc/locks leaves out the other jobs' tickets (issue 36.5).
func procSeesNode() error {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil || ns == initPIDNamespace {
		return nil
	}
	status, _ := readProcFile("/proc/self/status", 64<<10)
	if v, ok := procLine(status, "NSpid:"); ok && len(strings.Fields(v)) == 1 {
		return errors.New("lease: amdrun runs in a PID namespace of its own (a container?), where /proc does not show other jobs waiting: --wait cannot keep their order here; run amdrun in the node's PID namespace, or without --wait")
	}
	return nil
}
