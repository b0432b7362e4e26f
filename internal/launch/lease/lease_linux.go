package lease

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Open opens the lease directory at path, creating it (and its parents)
// when missing with mode 01777 (sticky and world-writable, like /tmp) so
// that every user of the node shares it. It refuses a path that is a
// symlink or not a directory, or a directory this process cannot write;
// it warns (through warn, which may be nil) when the directory is
// world-writable but not sticky, since then any user can delete another's
// lease files.
func Open(path string, warn func(string, ...any)) (*Dir, error) {
	return openDir(path, fs.ModeSticky|0o777, false, warn)
}

// OpenDefault is Open with fall-backs for when path cannot be used (no
// /run/lock, a read-only file system): it warns and tries
// $XDG_RUNTIME_DIR/amdrun, then os.TempDir()/amdrun-<euid>. Those are
// private to this user (mode 0700, and they must be owned by this user),
// so jobs of other users will not see the leases taken there; the warning
// says so. It returns the first error when nothing works.
func OpenDefault(path string, warn func(string, ...any)) (*Dir, error) {
	d, err := Open(path, warn)
	if err == nil {
		return d, nil
	}
	var alts []string
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" && filepath.IsAbs(x) {
		alts = append(alts, filepath.Join(x, "amdrun"))
	}
	alts = append(alts, filepath.Join(os.TempDir(), "amdrun-"+strconv.Itoa(os.Geteuid())))
	for _, alt := range alts {
		d, aerr := openDir(alt, 0o700, true, warn)
		if aerr == nil {
			if warn != nil {
				warn("%v; using %s instead: jobs of other users will not see these leases", err, alt)
			}
			return d, nil
		}
		if warn != nil {
			warn("%v", aerr)
		}
	}
	return nil, err
}

func openDir(path string, mode os.FileMode, mustOwn bool, warn func(string, ...any)) (*Dir, error) {
	if path == "" {
		return nil, fmt.Errorf("lease: empty lease directory path")
	}
	path = filepath.Clean(path)
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if perr := os.MkdirAll(filepath.Dir(path), 0o755); perr != nil {
			return nil, fmt.Errorf("lease: cannot create lease directory: %w", perr)
		}
		err = os.Mkdir(path, mode.Perm())
		if err == nil {
			// Mkdir's mode went through the umask and cannot set the sticky bit.
			if cerr := os.Chmod(path, mode); cerr != nil {
				return nil, fmt.Errorf("lease: %w", cerr)
			}
		} else if !errors.Is(err, fs.ErrExist) { // another job may have just made it
			return nil, fmt.Errorf("lease: cannot create lease directory: %w", err)
		}
		fi, err = os.Lstat(path)
	}
	if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("lease: %s: %w: lease directory is a symlink", path, ErrUnsafe)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("lease: %s: %w: lease directory is not a directory", path, ErrUnsafe)
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return nil, fmt.Errorf("lease: %w", &fs.PathError{Op: "lstat", Path: path, Err: err})
	}
	euid := os.Geteuid()
	if mustOwn && int(st.Uid) != euid {
		return nil, fmt.Errorf("lease: %s: %w: private lease directory is owned by uid %d, not %d", path, ErrUnsafe, st.Uid, euid)
	}
	if err := unix.Access(path, unix.W_OK|unix.X_OK); err != nil {
		return nil, fmt.Errorf("lease: %s: cannot write lease directory: %w", path, err)
	}
	d := &Dir{path: path, warn: warn, euid: euid}
	if fi.Mode().Perm()&0o002 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		d.warnf("lease: %s is world-writable but not sticky: any user can delete lease files (chmod 1777 it)", path)
	}
	return d, nil
}

// openFile opens path without following a symlink, without blocking (a
// FIFO planted there) and without handing the fd to children. It creates
// the file (0644) when create is set, and falls back to a plain open and
// then a read-only one when permissions refuse: flock works on a
// read-only fd. It fails, wrapping ErrUnsafe, unless path is a regular
// file. writable reports an fd opened for writing.
func openFile(path string, create bool) (fd int, writable bool, st unix.Stat_t, err error) {
	const base = unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY
	flags := []int{unix.O_RDWR, unix.O_RDONLY}
	if create {
		// O_CREAT on another user's file in a sticky directory is refused
		// by fs.protected_regular, hence the retry without it.
		flags = []int{unix.O_RDWR | unix.O_CREAT, unix.O_RDWR, unix.O_RDONLY}
	}
	for _, f := range flags {
		fd, err = unix.Open(path, base|f, 0o644)
		if err == nil {
			writable = f&unix.O_RDWR != 0
			break
		}
		if err != unix.EACCES && err != unix.EPERM {
			break
		}
	}
	if err != nil {
		if err == unix.ELOOP {
			return -1, false, st, fmt.Errorf("lease: %s: %w: is a symlink", path, ErrUnsafe)
		}
		return -1, false, st, fmt.Errorf("lease: %w", &fs.PathError{Op: "open", Path: path, Err: err})
	}
	if err = unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, false, st, fmt.Errorf("lease: %w", &fs.PathError{Op: "fstat", Path: path, Err: err})
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, false, st, fmt.Errorf("lease: %s: %w: not a regular file", path, ErrUnsafe)
	}
	return fd, writable, st, nil
}

// flockNB takes how|LOCK_NB, retrying EINTR. It reports false when
// another open file holds a conflicting lock.
func flockNB(fd, how int) (bool, error) {
	for {
		err := unix.Flock(fd, how|unix.LOCK_NB)
		switch err {
		case nil:
			return true, nil
		case unix.EWOULDBLOCK:
			return false, nil
		case unix.EINTR:
			continue
		}
		return false, err
	}
}

// samePath reports whether path still names the file open as st: the
// owner of a file may unlink it between our open and our lock, and a lock
// on an unlinked file protects nothing.
func samePath(path string, st *unix.Stat_t) bool {
	var now unix.Stat_t
	if err := unix.Lstat(path, &now); err != nil {
		return false
	}
	return now.Dev == st.Dev && now.Ino == st.Ino
}

// lockPath opens (creating) path and takes an exclusive lock, without
// waiting. ok is false when another process holds it.
func lockPath(path string) (fd int, writable bool, st unix.Stat_t, ok bool, err error) {
	for range 5 {
		fd, writable, st, err = openFile(path, true)
		if err != nil {
			return -1, false, st, false, err
		}
		ok, err = flockNB(fd, unix.LOCK_EX)
		if err != nil {
			unix.Close(fd)
			return -1, false, st, false, fmt.Errorf("lease: flock %s: %w", path, err)
		}
		if !ok {
			unix.Close(fd)
			return -1, false, st, false, nil
		}
		if samePath(path, &st) {
			return fd, writable, st, true, nil
		}
		unix.Close(fd) // replaced under us: lock the new file
	}
	return -1, false, st, false, fmt.Errorf("lease: %s keeps being replaced", path)
}

// Lock takes the node-wide selection lock (DIR/.lock), waiting until it
// is free or ctx is done (then it returns an error wrapping ctx.Err()).
// Hold it only while choosing and acquiring devices: call unlock (safe
// to call twice) right after Acquire.
func (d *Dir) Lock(ctx context.Context) (unlock func(), err error) {
	path := filepath.Join(d.path, ".lock")
	// flock(2) cannot be interrupted by ctx, so poll with a short backoff.
	wait := time.Millisecond
	for {
		fd, _, _, ok, err := lockPath(path)
		if err != nil {
			return nil, err
		}
		if ok {
			var once sync.Once
			return func() { once.Do(func() { unix.Close(fd) }) }, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("lease: waiting for the node lock %s: %w", path, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}

// Held reports which of keys are leased by a live process now, with what
// their lease files say about the holder. A lease file whose lock is free
// is not held, whatever its content. When the content is missing or
// stale (another user's file, which the holder could not write), the
// Holder comes from the kernel's lock table and /proc instead. A key that
// is held may be taken by nobody else; Held itself takes no lasting lock.
func (d *Dir) Held(keys []string) (map[string]Holder, error) {
	names, err := checkKeys(keys)
	if err != nil {
		return nil, err
	}
	held := make(map[string]Holder)
	var locks []procLock
	var locksRead bool
	for i, key := range keys {
		path := filepath.Join(d.path, names[i])
		fd, _, st, err := openFile(path, false)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		// A shared probe: two probes never conflict with each other, and it
		// is dropped with the close below.
		free, err := flockNB(fd, unix.LOCK_SH)
		if err != nil || free {
			unix.Close(fd)
			if err != nil {
				return nil, fmt.Errorf("lease: flock %s: %w", path, err)
			}
			continue
		}
		h, hok := readHolder(fd)
		unix.Close(fd)
		if !locksRead {
			locks, locksRead = readProcLocks(), true
		}
		kpid := lockPID(locks, &st)
		if !hok || (kpid > 0 && h.PID != kpid) {
			h = procHolder(kpid, key)
		}
		held[key] = h
	}
	return held, nil
}

func readHolder(fd int) (Holder, bool) {
	buf := make([]byte, maxInfo)
	n, err := unix.Pread(fd, buf, 0)
	if err != nil || n <= 0 {
		return Holder{}, false
	}
	var h Holder
	if json.Unmarshal(buf[:n], &h) != nil || h.PID <= 0 {
		return Holder{}, false
	}
	return h, true
}

// procHolder describes pid from /proc, for a lease file whose content
// does not name its holder.
func procHolder(pid int, key string) Holder {
	h := Holder{PID: pid, Devices: []string{key}}
	if pid <= 0 {
		return h
	}
	dir := "/proc/" + strconv.Itoa(pid)
	var st unix.Stat_t
	if unix.Stat(dir, &st) == nil {
		h.UID = int(st.Uid)
		h.User = userName(h.UID)
	}
	if b, err := os.ReadFile(dir + "/cmdline"); err == nil {
		h.Command = strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	}
	return h
}

type procLock struct {
	pid               int
	major, minor, ino uint64
}

// readProcLocks reads the exclusive flock locks of /proc/locks, lines like
// "1: FLOCK  ADVISORY  WRITE 8705 fe:00:9978714 0 EOF". Blocked waiters
// ("1: -> FLOCK ...") hold nothing and are skipped.
func readProcLocks() []procLock {
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return nil
	}
	var out []procLock
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] != "FLOCK" || f[3] != "WRITE" {
			continue
		}
		pid, err := strconv.Atoi(f[4])
		if err != nil {
			continue
		}
		id := strings.Split(f[5], ":")
		if len(id) != 3 {
			continue
		}
		maj, err1 := strconv.ParseUint(id[0], 16, 32)
		mnr, err2 := strconv.ParseUint(id[1], 16, 32)
		ino, err3 := strconv.ParseUint(id[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		out = append(out, procLock{pid: pid, major: maj, minor: mnr, ino: ino})
	}
	return out
}

func lockPID(locks []procLock, st *unix.Stat_t) int {
	for _, l := range locks {
		if l.ino == st.Ino && l.major == uint64(unix.Major(st.Dev)) && l.minor == uint64(unix.Minor(st.Dev)) {
			return l.pid
		}
	}
	return 0
}

// Acquire leases every one of keys, or none: it takes an exclusive
// non-blocking flock on DIR/<FileName(key)> for each, and on the first
// that is held it lets go of the others and returns an error wrapping
// ErrBusy that names the key and its holder. A symlink or other
// non-regular file at a lease path gives an error wrapping ErrUnsafe that
// names the path. After locking, it writes info as JSON into each lease
// file this user owns (info.Devices defaults to keys); another user's
// stale file is locked read-only and left as it is. Call it under Lock so
// that choosing and acquiring are one step.
func (d *Dir) Acquire(keys []string, info Holder) (*Lease, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("lease: %w: no device keys to lease", ErrBadKey)
	}
	names, err := checkKeys(keys)
	if err != nil {
		return nil, err
	}
	if info.Devices == nil {
		info.Devices = append([]string(nil), keys...)
	}
	blob, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	blob = append(blob, '\n')
	l := &Lease{dir: d, keys: append([]string(nil), keys...)}
	for i, key := range keys {
		path := filepath.Join(d.path, names[i])
		var (
			fd       int
			writable bool
			st       unix.Stat_t
			ok       bool
		)
		// A Held probe in another process holds a shared lock for a few
		// microseconds; retry briefly rather than report a false busy.
		for try := 0; ; try++ {
			fd, writable, st, ok, err = lockPath(path)
			if err != nil || ok || try == 3 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if err != nil {
			l.Release()
			return nil, err
		}
		if !ok {
			l.Release()
			h, _ := d.Held([]string{key})
			if hh, found := h[key]; found {
				return nil, fmt.Errorf("lease: %s: %w: held by %s", key, ErrBusy, hh)
			}
			return nil, fmt.Errorf("lease: %s: %w", key, ErrBusy)
		}
		own := writable && int(st.Uid) == d.euid && st.Nlink == 1
		if writable && int(st.Uid) == d.euid && st.Nlink != 1 {
			// A hard link planted at the lease path: writing would change a
			// file elsewhere.
			d.warnf("lease: %s has %d links; not writing holder info into it", path, st.Nlink)
		}
		if own {
			if err := writeInfo(fd, blob); err != nil {
				d.warnf("lease: writing holder info to %s: %v", path, err)
			}
		}
		l.fds = append(l.fds, fd)
		l.own = append(l.own, own)
	}
	return l, nil
}

func writeInfo(fd int, blob []byte) error {
	if err := unix.Ftruncate(fd, 0); err != nil {
		return err
	}
	for off := 0; off < len(blob); {
		n, err := unix.Pwrite(fd, blob[off:], int64(off))
		if err != nil {
			return err
		}
		off += n
	}
	return nil
}

// Release gives the devices back. The lease files stay in place (removing
// a lock file races with a process that has just opened it); the holder
// info this process wrote is cleared. Calling it again does nothing.
func (l *Lease) Release() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first error
	for i, fd := range l.fds {
		if l.own[i] {
			_ = unix.Ftruncate(fd, 0) // still locked: nobody else writes it
		}
		if err := unix.Close(fd); err != nil && first == nil {
			first = fmt.Errorf("lease: release %s: %w", l.keys[i], err)
		}
	}
	l.fds, l.own = nil, nil
	return first
}

// List reports every device leased in the directory now, by key.
func (d *Dir) List() (map[string]Holder, error) {
	ents, err := os.ReadDir(d.path)
	if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	var keys []string
	for _, e := range ents {
		if k, ok := KeyFromFileName(e.Name()); ok && e.Type().IsRegular() {
			keys = append(keys, k)
		}
	}
	return d.Held(keys)
}

const queueDir = "queue"

// Enqueue joins the waiting queue in DIR/queue: it creates and locks a
// ticket file named <monotonic ns>-<pid>.lock. The ticket is locked before
// it gets its final name, so a ticket that can be seen unlocked belongs to
// a dead waiter. Call Done when the wait is over.
func (d *Dir) Enqueue() (*Ticket, error) {
	qd := filepath.Join(d.path, queueDir)
	if err := os.Mkdir(qd, 0o777); err == nil {
		if err := os.Chmod(qd, fs.ModeSticky|0o777); err != nil {
			return nil, fmt.Errorf("lease: %w", err)
		}
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("lease: %w", err)
	}
	fi, err := os.Lstat(qd)
	if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("lease: %s: %w: queue is not a directory", qd, ErrUnsafe)
	}
	pid := os.Getpid()
	for range 10 {
		tmp := filepath.Join(qd, fmt.Sprintf(".tmp-%d-%d", pid, time.Now().UnixNano()))
		fd, err := unix.Open(tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return nil, fmt.Errorf("lease: %w", &fs.PathError{Op: "create", Path: tmp, Err: err})
		}
		if ok, err := flockNB(fd, unix.LOCK_EX); !ok || err != nil {
			unix.Close(fd)
			unix.Unlink(tmp)
			return nil, fmt.Errorf("lease: cannot lock new ticket %s: %v", tmp, err)
		}
		var ts unix.Timespec
		// CLOCK_MONOTONIC is one clock for every process on the node and
		// never jumps back, unlike the wall clock.
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			unix.Close(fd)
			unix.Unlink(tmp)
			return nil, fmt.Errorf("lease: %w", err)
		}
		name := fmt.Sprintf("%020d-%010d.lock", ts.Nano(), pid)
		err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, filepath.Join(qd, name), unix.RENAME_NOREPLACE)
		if err == unix.EINVAL || err == unix.ENOSYS { // file system without RENAME_NOREPLACE
			err = unix.Link(tmp, filepath.Join(qd, name))
			if err == nil {
				unix.Unlink(tmp)
			}
		}
		if err == nil {
			return &Ticket{dir: d, name: name, fd: fd}, nil
		}
		unix.Close(fd)
		unix.Unlink(tmp)
		if err != unix.EEXIST {
			return nil, fmt.Errorf("lease: %w", &fs.PathError{Op: "rename", Path: tmp, Err: err})
		}
	}
	return nil, fmt.Errorf("lease: cannot name a ticket in %s", qd)
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

// First reports whether no older live ticket is in the queue, that is,
// whether it is this ticket's turn to try to acquire. It removes tickets
// of dead waiters it comes across (when it may) and ignores anything in
// the queue that is not a ticket. After Done it returns an error.
func (t *Ticket) First() (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fd < 0 {
		return false, fmt.Errorf("lease: ticket %s is done", t.name)
	}
	qd := filepath.Join(t.dir.path, queueDir)
	ents, err := os.ReadDir(qd)
	if err != nil {
		return false, fmt.Errorf("lease: %w", err)
	}
	var older []string
	for _, e := range ents {
		n := e.Name()
		if ticketName(n) && n < t.name {
			older = append(older, n)
		} else if strings.HasPrefix(n, ".tmp-") {
			removeStaleTemp(filepath.Join(qd, n))
		}
	}
	slices.Sort(older)
	for _, n := range older {
		path := filepath.Join(qd, n)
		fd, _, _, err := openFile(path, false)
		if err != nil {
			continue // gone, or not a ticket: neither is a live waiter
		}
		free, err := flockNB(fd, unix.LOCK_SH)
		if err == nil && free {
			// Its waiter is dead: tidy up. A ticket is locked before it is
			// named, so nobody can be about to lock this one.
			_ = unix.Unlink(path)
		}
		unix.Close(fd)
		if err == nil && !free {
			return false, nil
		}
	}
	return true, nil
}

// removeStaleTemp removes a ticket left half-made by a waiter that died
// between creating and naming it; only minutes-old ones, so as not to race
// a waiter that is naming it right now.
func removeStaleTemp(path string) {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return
	}
	if time.Since(time.Unix(st.Mtim.Unix())) < time.Minute {
		return
	}
	fd, _, _, err := openFile(path, false)
	if err != nil {
		return
	}
	if free, err := flockNB(fd, unix.LOCK_SH); err == nil && free {
		_ = unix.Unlink(path)
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
	_ = unix.Unlink(filepath.Join(t.dir.path, queueDir, t.name))
	unix.Close(t.fd)
	t.fd = -1
}

// Claim leases the devices choose picks, under the node lock. Held is
// asked about all (every key that might be chosen). With poll <= 0 it
// tries once and returns choose's ErrBusy error when nothing fits. With
// poll > 0 it waits its turn in the queue, first come first served, and
// retries every poll until it gets a lease or ctx is done (then it returns
// an error wrapping ctx.Err()). info.Devices defaults to the chosen keys.
func (d *Dir) Claim(ctx context.Context, all []string, info Holder, choose Chooser, poll time.Duration) (*Lease, error) {
	try := func() (*Lease, error) {
		unlock, err := d.Lock(ctx)
		if err != nil {
			return nil, err
		}
		defer unlock()
		held, err := d.Held(all)
		if err != nil {
			return nil, err
		}
		keys, err := choose(held)
		if err != nil {
			return nil, err
		}
		return d.Acquire(keys, info)
	}
	if poll <= 0 {
		return try()
	}
	t, err := d.Enqueue()
	if err != nil {
		return nil, err
	}
	defer t.Done()
	for {
		first, err := t.First()
		if err != nil {
			return nil, err
		}
		if first {
			l, err := try()
			if err == nil || !errors.Is(err, ErrBusy) {
				return l, err
			}
		}
		tm := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			tm.Stop()
			return nil, fmt.Errorf("lease: waiting for devices: %w", ctx.Err())
		case <-tm.C:
		}
	}
}
