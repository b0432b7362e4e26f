package lease

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Open opens the lease directory at path, resolved once by walk; all
// later work is relative to its descriptor. Mode and Degraded (warned
// through o.Warn when notice says so) come from the owner and permissions
// of the directory and those above it.
func Open(path string, o Options) (*Dir, error) {
	if path == "" {
		return nil, fmt.Errorf("lease: empty lease directory path")
	}
	clean := filepath.Clean(path)
	euid := os.Geteuid()
	w, err := walk("lease", "lease directory", clean, o.Create, 0o777)
	if errors.Is(err, fs.ErrNotExist) && !o.Create {
		return &Dir{path: clean, fd: -1, owner: -1, euid: euid, warn: o.Warn}, nil
	}
	if err != nil {
		return nil, err
	}
	if w.created && int(w.st.Uid) == euid {
		// Mkdir's mode went through the umask and has no sticky bit.
		if err := unix.Fchmod(w.fd, 0o1777); err != nil {
			w.close()
			return nil, fmt.Errorf("lease: %w", &fs.PathError{Op: "chmod", Path: clean, Err: err})
		}
		_ = unix.Fstat(w.fd, &w.st)
	}
	d := &Dir{
		path: clean, fd: w.fd, dev: w.st.Dev, ino: w.st.Ino,
		owner: int(w.st.Uid), euid: euid, warn: o.Warn,
	}
	perm := w.st.Mode & 0o7777
	switch {
	case perm&0o022 != 0:
		d.mode = Shared
		d.degraded = fmt.Sprintf("lease directory %s is not root-prepared (degraded mode: writable by other users, owner %s): another user can take a device a job holds; ask root to run 'amdrun lease init'",
			clean, ownerName(d.owner))
		if perm&0o002 != 0 && perm&unix.S_ISVTX == 0 {
			d.degraded += fmt.Sprintf(" (and chmod 1777 %s: without the sticky bit any user can delete any lease file)", clean)
		}
	default:
		d.mode = Owned
		switch {
		case d.owner != 0 && d.owner != euid:
			d.degraded = fmt.Sprintf("lease directory %s belongs to %s, who can take devices other users' jobs hold there; use one root prepared: --lease-dir or AMDRUN_LEASE_DIR naming a path where root ran 'amdrun lease init'",
				clean, ownerName(d.owner))
		case w.unsafeAt != "":
			d.degraded = fmt.Sprintf("the way to lease directory %s can be changed by %s (%s): another user can swap it; use a directory whose parents only root can change",
				clean, ownerName(w.unsafeBy), w.unsafeAt)
		}
	}
	if d.degraded != "" && d.warn != nil && d.notice() {
		d.warn("%s", d.degraded)
	}
	return d, nil
}

// Close closes the directory; leases and tickets taken through it stay.
func (d *Dir) Close() error {
	if d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// mayCreate reports whether this process may make a missing lease file:
// anyone in a shared directory; in an owned one only its owner and root.
func (d *Dir) mayCreate() bool {
	return d.mode == Shared || d.euid == 0 || d.euid == d.owner
}

// lockFile opens DIR/name read-only for locking (root's 0644 file serves
// every user): a regular file with one link, no symlink followed, no FIFO
// blocked on. A missing one is made (0644) with create, else the error
// wraps fs.ErrNotExist; anything else wraps ErrUnsafe naming it and its owner.
func (d *Dir) lockFile(name string, create bool) (int, unix.Stat_t, error) {
	path := filepath.Join(d.path, name)
	var st unix.Stat_t
	if d.fd < 0 {
		return -1, st, fmt.Errorf("lease: %w", &fs.PathError{Op: "open", Path: d.path, Err: fs.ErrNotExist})
	}
	for range 5 {
		err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.ENOENT {
			if !create {
				return -1, st, fmt.Errorf("lease: %w", &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist})
			}
			fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0o644)
			if err != nil && err != unix.EEXIST {
				return -1, st, fmt.Errorf("lease: %w: cannot create %s: %w", ErrUnsafe, path, err)
			}
			if err == nil {
				_ = unix.Fchmod(fd, 0o644)
				unix.Close(fd)
			}
			continue // open it as any other
		}
		if err != nil {
			return -1, st, fmt.Errorf("lease: %w", &fs.PathError{Op: "stat", Path: path, Err: err})
		}
		if kind := fileKind(st.Mode); kind != "" {
			return -1, st, fmt.Errorf("lease: %s: %w: %s owned by %s", path, ErrUnsafe, kind, ownerName(int(st.Uid)))
		}
		if st.Nlink != 1 {
			return -1, st, fmt.Errorf("lease: %s: %w: a file with %d links owned by %s", path, ErrUnsafe, st.Nlink, ownerName(int(st.Uid)))
		}
		fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		if err == unix.ENOENT || err == unix.ELOOP {
			continue // replaced between the look and the open
		}
		if err == unix.EACCES {
			return -1, st, fmt.Errorf("lease: %s: %w: cannot be read (mode %04o, owned by %s)", path, ErrUnsafe, st.Mode&0o7777, ownerName(int(st.Uid)))
		}
		if err != nil {
			return -1, st, fmt.Errorf("lease: %w", &fs.PathError{Op: "open", Path: path, Err: err})
		}
		var fst unix.Stat_t
		if err := unix.Fstat(fd, &fst); err != nil || fst.Dev != st.Dev || fst.Ino != st.Ino {
			unix.Close(fd)
			continue
		}
		return fd, fst, nil
	}
	return -1, st, fmt.Errorf("lease: %s: %w: keeps being replaced", path, ErrUnsafe)
}

// stillNamed reports whether name in dfd still is the file st (a lock on
// a file unlinked since protects nothing).
func stillNamed(dfd int, name string, st *unix.Stat_t) bool {
	var now unix.Stat_t
	return unix.Fstatat(dfd, name, &now, unix.AT_SYMLINK_NOFOLLOW) == nil && now.Dev == st.Dev && now.Ino == st.Ino
}

// flockNB takes how|LOCK_NB, retrying EINTR; false when another holds it.
func flockNB(fd, how int) (bool, error) {
	var err error = unix.EINTR
	for err == unix.EINTR {
		err = unix.Flock(fd, how|unix.LOCK_NB)
	}
	if err == unix.EWOULDBLOCK {
		return false, nil
	}
	return err == nil, err
}

// probeRetries is how many more times, 1 ms apart, a taken lock is tried
// before it counts as held: Held elsewhere probes each lock.
const probeRetries = 3

// lockName opens (creating when create) and locks DIR/name without waiting.
func (d *Dir) lockName(name string, create bool) (fd int, ok bool, err error) {
	for range 5 {
		fd, st, err := d.lockFile(name, create)
		if err != nil {
			return -1, false, err
		}
		got := false
		for try := 0; ; try++ {
			got, err = flockNB(fd, unix.LOCK_EX)
			if err != nil || got || try == probeRetries {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if err != nil || !got {
			unix.Close(fd)
			if err != nil {
				err = fmt.Errorf("lease: flock %s: %w", filepath.Join(d.path, name), err)
			}
			return -1, false, err
		}
		if stillNamed(d.fd, name, &st) {
			return fd, true, nil
		}
		unix.Close(fd) // replaced under us: lock the new file
	}
	return -1, false, fmt.Errorf("lease: %s: %w: keeps being replaced", filepath.Join(d.path, name), ErrUnsafe)
}

// Lock takes the node lock (DIR/.lock), waiting until it is free or ctx
// is done (a *LockedError names the holder); call unlock (safe twice)
// right after Acquire. The device locks keep devices apart, so a .lock
// that cannot be used is warned about once and unlock does nothing.
func (d *Dir) Lock(ctx context.Context) (unlock func(), err error) {
	if d.fd < 0 {
		return nil, fmt.Errorf("lease: lease directory %s does not exist", d.path)
	}
	start := time.Now()
	// ctx cannot interrupt flock(2): poll with a short backoff.
	wait := time.Millisecond
	for {
		fd, ok, err := d.lockName(nodeLock, d.mayCreate())
		if err != nil {
			d.warnOnce(nodeLock, "%v; choosing devices without the node lock (jobs still never share a device)", err)
			return func() {}, nil
		}
		if ok {
			return sync.OnceFunc(func() { unix.Close(fd) }), nil
		}
		select {
		case <-ctx.Done():
			return nil, &LockedError{Path: filepath.Join(d.path, nodeLock), Holder: d.holderOf(nodeLock), Waited: time.Since(start), Err: ctx.Err()}
		case <-time.After(wait):
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}

// holderOf says who holds the lock on DIR/name now.
func (d *Dir) holderOf(name string) Holder {
	fd, st, err := d.lockFile(name, false)
	if err != nil {
		return Holder{UID: -1}
	}
	unix.Close(fd)
	return lockHolder(readProcLocks(), d.id(&st))
}

// id is the file st of the directory as /proc/locks names it.
func (d *Dir) id(st *unix.Stat_t) fileID { return d.names.id(d.fd, st) }

// fault warns once that key's lease file cannot be used and says so in a State.
func (d *Dir) fault(key string, err error) State {
	d.warnOnce("key:"+key, "%v; device %s cannot be leased until that is fixed", err, key)
	return State{Fault: err}
}

// Held reports which of keys cannot be leased now: leased by a live
// process (the holder as the kernel knows it), or with an unusable lease
// file (State.Fault, warned once). It fails only for bad keys.
func (d *Dir) Held(keys []string) (map[string]State, error) {
	names, err := checkKeys(keys)
	if err != nil {
		return nil, err
	}
	held := make(map[string]State)
	type taken struct {
		key string
		fd  int
		st  unix.Stat_t
	}
	var busy []taken
	for i, key := range keys {
		fd, st, err := d.lockFile(names[i], false)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && d.mayCreate() {
				continue // made on first use
			}
			held[key] = d.fault(key, d.noFile(names[i], err))
			continue
		}
		// Exclusive, so that a shared lock (every Acquire fails) counts too.
		free, err := flockNB(fd, unix.LOCK_EX)
		if err != nil || free {
			unix.Close(fd) // and so the probe
			if err != nil {
				held[key] = d.fault(key, fmt.Errorf("lease: flock %s: %w", filepath.Join(d.path, names[i]), err))
			}
			continue
		}
		busy = append(busy, taken{key, fd, st})
	}
	for try := 0; try < probeRetries && len(busy) > 0; try++ {
		time.Sleep(time.Millisecond)
		busy = slices.DeleteFunc(busy, func(b taken) bool {
			free, err := flockNB(b.fd, unix.LOCK_EX)
			if free = free && err == nil; free {
				unix.Close(b.fd)
			}
			return free
		})
	}
	if len(busy) > 0 {
		locks := readProcLocks()
		byPID := map[int]Holder{} // one job holds many devices: read /proc once
		for _, b := range busy {
			id := d.id(&b.st)
			pid := lockPID(locks, id)
			h, ok := byPID[pid]
			if ok && h.Locker != 0 && h.PID > 0 {
				// The process found holding what pid took likely holds this too.
				budget := maxFdinfo
				ok, _ = holds(h.PID, id, &budget)
			}
			if !ok {
				h = resolveHolder(pid, id)
				byPID[pid] = h
			}
			held[b.key] = State{Holder: h}
			unix.Close(b.fd)
		}
	}
	return held, nil
}

// noFile is err, or for a lease file missing (fs.ErrNotExist) where this
// process may not make it, an ErrUnsafe error saying who makes them.
func (d *Dir) noFile(name string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("lease: %s: %w: no lease file (the directory's owner makes them: amdrun lease init)", filepath.Join(d.path, name), ErrUnsafe)
	}
	return err
}

// Acquire leases every one of keys, or none: at the first held it lets
// the others go and returns an error wrapping ErrBusy naming the key and
// its holder (ErrUnsafe for a file that cannot be used). Call it under
// Lock so that choosing and acquiring are one step.
func (d *Dir) Acquire(keys []string) (*Lease, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("lease: %w: no device keys to lease", ErrBadKey)
	}
	names, err := checkKeys(keys)
	if err != nil {
		return nil, err
	}
	l := &Lease{keys: append([]string(nil), keys...)}
	for i, key := range keys {
		fd, ok, err := d.lockName(names[i], d.mayCreate())
		if err != nil {
			l.Release()
			return nil, d.noFile(names[i], err)
		}
		if !ok {
			l.Release()
			if h, _ := d.Held([]string{key}); h[key].Fault == nil && h[key].Holder.PID != 0 {
				return nil, fmt.Errorf("lease: %s: %w: held by %s", key, ErrBusy, h[key].Holder)
			}
			return nil, fmt.Errorf("lease: %s: %w", key, ErrBusy)
		}
		l.fds = append(l.fds, fd)
	}
	return l, nil
}

// Release gives the devices back by closing this process's lock
// descriptors (a duplicate handed on keeps the lock until it closes). The
// files stay: removing one races with a process that just opened it.
// Calling it again does nothing.
func (l *Lease) Release() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first error
	for i, fd := range l.fds {
		if err := unix.Close(fd); err != nil && first == nil {
			first = fmt.Errorf("lease: release %s: %w", l.keys[i], err)
		}
	}
	l.fds = nil
	return first
}

// Files returns a close-on-exec duplicate of each lock descriptor for the
// job's watchers (issue 13: the devices stay leased while anything the job
// started runs). It fails after Release.
func (l *Lease) Files() ([]*os.File, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fds == nil {
		return nil, errors.New("lease: released")
	}
	out := make([]*os.File, 0, len(l.fds))
	for i, fd := range l.fds {
		dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			for _, f := range out {
				f.Close()
			}
			return nil, fmt.Errorf("lease: %s: %w", l.keys[i], err)
		}
		out = append(out, os.NewFile(uintptr(dup), l.keys[i]))
	}
	return out, nil
}

// names lists the directory dirfd through a descriptor of its own (a
// shared one would share the offset).
func names(dirfd int, path string) ([]string, error) {
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("lease: %w", &fs.PathError{Op: "open", Path: path, Err: err})
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	n, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	return n, nil
}

// Claim leases the devices choose picks (given Held of all) under the
// node lock: once with poll <= 0, else queued for need devices, every poll
// until a lease or ctx is done (an error wrapping ctx.Err()). A full queue
// for this user fails at once (ErrQueueFull); a queue that cannot be used
// otherwise is warned about and waited without.
func (d *Dir) Claim(ctx context.Context, all []string, need int, choose Chooser, poll time.Duration) (*Lease, error) {
	if poll <= 0 {
		return d.claimOnce(ctx, all, choose, nil)
	}
	t, err := d.Enqueue(need, len(all))
	var w *wake
	switch {
	case errors.Is(err, ErrQueueFull):
		return nil, err
	case err != nil:
		d.warnOnce("queue", "%v; waiting without first-come-first-served order", err)
		t = nil
	default:
		defer t.Done()
		t.clock.step = poll
		w = d.watch(all)
		defer w.close()
	}
	for {
		try, soon := true, true
		if t != nil {
			if try, soon, err = t.mayTry(all, w.idled()); err != nil {
				return nil, err
			}
		}
		if try {
			l, err := d.claimOnce(ctx, all, choose, t)
			if err == nil || !errors.Is(err, ErrBusy) {
				return l, err
			}
		}
		rested, err := w.sleep(ctx, poll, soon, t.leases())
		if err != nil {
			return nil, &WaitError{Behind: t.HeldBy(), Err: err}
		}
		if rested {
			t.rested()
		}
	}
}

// errNotYourTurn: the queue holds this waiter back (see Ticket.HeldBy).
var errNotYourTurn = fmt.Errorf("%w: an older job in the queue goes first", ErrBusy)

// claimOnce is one try under the node lock: the free count, the queue's
// turn (t set) and the lease all under one lock.
func (d *Dir) claimOnce(ctx context.Context, all []string, choose Chooser, t *Ticket) (*Lease, error) {
	unlock, err := d.Lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// A job must not lease where jobs opening the path would not see it.
	var st unix.Stat_t
	if err := unix.Stat(d.path, &st); err != nil || st.Dev != d.dev || st.Ino != d.ino {
		return nil, fmt.Errorf("lease: lease directory %s was moved or replaced while this job chose devices; run the job again", d.path)
	}
	held, err := d.Held(all)
	if err != nil {
		return nil, err
	}
	free := len(all) - len(held)
	if t != nil {
		first, err := t.First(free)
		if err != nil {
			return nil, err
		}
		if !first {
			return nil, errNotYourTurn
		}
	}
	keys, err := choose(held)
	if err != nil {
		return nil, err
	}
	// Read the queue only once devices are there (issue 36.7: 256 jobs
	// each reading it under the lock first, one in five joined after 110 s).
	// A job not in the queue goes as if it came last, patience spent: a
	// ticket that waited Backfill still goes first.
	if t == nil {
		c := clock{spent: Patience}
		if ok, by := (rule{Patience, Backfill}).turn(d.Queue(len(all)), free, time.Now(), &c); !ok {
			return nil, fmt.Errorf("lease: %w: a job waiting longer than %s keeps its place in the queue: %s", ErrBusy, Backfill, by)
		}
	}
	return d.Acquire(keys)
}

// cpuFilesMade fails where this process may not make lease files and the
// first of cpus has none: Held would warn for every CPU.
func (d *Dir) cpuFilesMade(cpus []int) error {
	if len(cpus) == 0 || d.fd < 0 || d.mayCreate() {
		return nil
	}
	name, _ := FileName(CPUKey(cpus[0])) // a CPU key is always a file name
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("lease: %s: %w", filepath.Join(d.path, name), ErrNoCPUFiles)
	}
	return nil
}

// ListCPUs reports, by CPU, every CPU lease held now or unusable.
func (d *Dir) ListCPUs() (map[int]State, error) {
	if d.fd < 0 {
		return map[int]State{}, nil
	}
	ents, err := names(d.fd, d.path)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, n := range ents {
		k, _ := KeyFromFileName(n) // "" for no key
		if _, isCPU := CPUOfKey(k); isCPU {
			keys = append(keys, k)
		}
	}
	held, err := d.Held(keys)
	return byCPU(held), err
}
