package lease

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amdrun/amdrun/internal/printable"
)

// Who holds a lease comes from the kernel (/proc/locks, /proc/<pid>);
// F_OFD_GETLK sees only fcntl locks, never flock(2) ones.

// procLock is one granted flock of /proc/locks.
type procLock struct {
	pid   int
	write bool
	fileID
}

// statID is st as stat names it.
func statID(st *unix.Stat_t) fileID {
	return fileID{uint64(unix.Major(st.Dev)), uint64(unix.Minor(st.Dev)), st.Ino}
}

// id is the file st in the directory dirfd as /proc/locks names it. Its
// device is not always stat's (a btrfs subvolume, an overlay; issue 36.5),
// so it is learnt once from a shared flock on the directory (amdrun locks
// none there); stat's when that fails.
func (n *lockNames) id(dirfd int, st *unix.Stat_t) fileID {
	n.once.Do(func() { n.dev, n.ok = lockDev(dirfd) })
	if !n.ok {
		return statID(st)
	}
	return fileID{n.dev.major, n.dev.minor, st.Ino}
}

// lockDev is the device /proc/locks prints for the directory dirfd.
func lockDev(dirfd int) (fileID, bool) {
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fileID{}, false
	}
	defer unix.Close(fd) // and so the lock
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return fileID{}, false
	}
	if got, err := flockNB(fd, unix.LOCK_SH); err != nil || !got {
		return fileID{}, false
	}
	return ownLock(readProcLocks(), os.Getpid(), st.Ino)
}

// ownLock is the device of pid's shared lock on inode ino, if it is unique.
func ownLock(locks []procLock, pid int, ino uint64) (fileID, bool) {
	var dev fileID
	n := 0
	for _, l := range locks {
		if l.pid == pid && !l.write && l.ino == ino && (n == 0 || l.major != dev.major || l.minor != dev.minor) {
			dev, n = fileID{major: l.major, minor: l.minor}, n+1
		}
	}
	return dev, n == 1
}

// maxProcFile bounds what is read of one /proc file (a command line).
const maxProcFile = 1 << 20

func readProcFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}

func readProcLocks() []procLock {
	b, _ := readProcFile("/proc/locks", 16<<20)
	return parseProcLocks(b)
}

// parseProcLocks reads the granted flock lines of /proc/locks, like
// "1: FLOCK  ADVISORY  WRITE 8705 fe:00:9978714 0 EOF".
func parseProcLocks(b []byte) []procLock {
	var out []procLock
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "FLOCK" || (f[3] != "WRITE" && f[3] != "READ") {
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
		out = append(out, procLock{pid: pid, write: f[3] == "WRITE", fileID: fileID{maj, mnr, ino}})
	}
	return out
}

// lockPID is the pid holding a flock on id, an exclusive one (a lease)
// first; 0 when none is listed or the holder is outside this PID namespace.
func lockPID(locks []procLock, id fileID) int {
	pid := 0
	for _, l := range locks {
		if l.fileID == id {
			if l.write {
				return l.pid
			}
			if pid == 0 {
				pid = l.pid
			}
		}
	}
	return pid
}

func lockHolder(locks []procLock, id fileID) Holder {
	return resolveHolder(lockPID(locks, id), id)
}

// The pid /proc/locks gives took the lock but may not hold it now (the
// open file handed on, issue 26; the pid reused): /proc/<pid>/fdinfo/<fd>
// has a "lock:" line on every descriptor of the open file that holds it
// (Linux 4.1+). Another user's fdinfo needs root.

// lockLine reports whether an fdinfo text has a granted flock line for id.
func lockLine(fdinfo []byte, id fileID) bool {
	for _, line := range strings.Split(string(fdinfo), "\n") {
		rest, ok := strings.CutPrefix(line, "lock:")
		if ok && slices.ContainsFunc(parseProcLocks([]byte(strings.TrimSpace(rest))), func(l procLock) bool { return l.fileID == id }) {
			return true
		}
	}
	return false
}

// holds reports whether pid has a descriptor whose open file holds the
// lock on id; readable is false when /proc does not let this process look.
func holds(pid int, id fileID, budget *int) (held, readable bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/fdinfo"
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false, false
	}
	for _, fd := range fds {
		if *budget--; *budget < 0 {
			return false, true
		}
		b, err := readProcFile(dir+"/"+fd.Name(), 64<<10)
		if err == nil && lockLine(b, id) {
			return true, true
		}
	}
	return false, true
}

// maxFdinfo bounds the descriptors one look for a lock's holders reads.
const maxFdinfo = 200000

// resolveHolder says who holds the lock on id that locker took: the
// locker when it still does; else a process that does (Locker set,
// Outside when not amdrun); else the locker, Gone or Unverified. A reused
// pid is never named: the kernel says it holds nothing.
func resolveHolder(locker int, id fileID) Holder {
	if locker <= 0 {
		return Holder{PID: locker, UID: -1}
	}
	budget := maxFdinfo
	held, readable := holds(locker, id, &budget)
	if held {
		return procHolder(locker)
	}
	if h, ok := searchHolder(id, locker, &budget); ok {
		return h
	}
	h := procHolder(locker)
	if !h.Gone && readable {
		// Handed on (or the pid reused) to a process this one cannot see.
		return Holder{PID: 0, UID: -1, Locker: locker}
	}
	h.Unverified = !h.Gone
	return h
}

// searchHolder looks through /proc for a process holding the lock on id.
func searchHolder(id fileID, locker int, budget *int) (Holder, bool) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return Holder{}, false
	}
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != locker {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	for _, pid := range pids {
		if *budget <= 0 {
			break
		}
		if held, _ := holds(pid, id, budget); held {
			h := procHolder(pid)
			h.Locker = locker
			h.Outside = !isAmdrun(pid)
			return h, true
		}
	}
	return Holder{}, false
}

// isAmdrun reports whether pid runs this executable or one named amdrun
// (a job's guard or keeper keep its leases).
func isAmdrun(pid int) bool {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		return false
	}
	if filepath.Base(strings.TrimSuffix(exe, " (deleted)")) == "amdrun" {
		return true
	}
	var a, b unix.Stat_t
	return unix.Stat("/proc/"+strconv.Itoa(pid)+"/exe", &a) == nil && unix.Stat("/proc/self/exe", &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino
}

// procHolder describes pid from /proc: real uid, command line, start time.
func procHolder(pid int) Holder {
	h := Holder{PID: pid, UID: -1}
	dir := "/proc/" + strconv.Itoa(pid)
	status, err := readProcFile(dir+"/status", 64<<10)
	if err != nil {
		// Gone, unless /proc hides other users' processes (hidepid).
		h.Gone = errors.Is(unix.Kill(pid, 0), unix.ESRCH)
		return h
	}
	if uid, ok := statusUID(status); ok {
		h.UID, h.User = uid, userName(uid)
	}
	cmdline, _ := readProcFile(dir+"/cmdline", maxProcFile)
	h.Command = printable.String(strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " ")), 200)
	stat, _ := readProcFile(dir+"/stat", 64<<10)
	if bt, ok := bootTime(); ok {
		h.Start = startTime(stat, bt)
	}
	return h
}

// statusUID is the real uid of a /proc/<pid>/status, statusEUID the
// effective one (the owner of the files the process makes).
func statusUID(b []byte) (int, bool)  { return statusField(b, 0) }
func statusEUID(b []byte) (int, bool) { return statusField(b, 1) }

// statusField is the i-th uid (real, effective, saved, fs) of "Uid:".
func statusField(b []byte, i int) (int, bool) {
	v, _ := procLine(b, "Uid:")
	f := strings.Fields(v)
	if len(f) <= i {
		return 0, false
	}
	uid, err := strconv.Atoi(f[i])
	return uid, err == nil && uid >= 0
}

// procLine is the trimmed rest of a /proc text's line starting with prefix.
func procLine(b []byte, prefix string) (string, bool) {
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			return strings.TrimSpace(rest), true
		}
	}
	return "", false
}

// userHZ is USER_HZ, 100 on every Linux ABI amdrun builds for
// (sysconf(_SC_CLK_TCK) needs cgo).
const userHZ = 100

// startTicks reads field 22 of /proc/<pid>/stat, the start in clock ticks
// after boot, counted after the last ')' (the command may hold any).
func startTicks(stat []byte) (uint64, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state): field 22 is f[19].
	if len(f) < 20 {
		return 0, false
	}
	ticks, err := strconv.ParseUint(f[19], 10, 64)
	return ticks, err == nil
}

// startTime is startTicks as a wall-clock time; zero when unreadable.
func startTime(stat []byte, boot time.Time) time.Time {
	ticks, ok := startTicks(stat)
	if !ok {
		return time.Time{}
	}
	return boot.Add(time.Duration(ticks) * (time.Second / userHZ))
}

// bootTime is the "btime" of /proc/stat, read once.
var bootTime = sync.OnceValues(func() (time.Time, bool) {
	b, _ := readProcFile("/proc/stat", 1<<20)
	return parseBootTime(b)
})

func parseBootTime(b []byte) (time.Time, bool) {
	v, ok := procLine(b, "btime ")
	s, err := strconv.ParseInt(v, 10, 64)
	if !ok || err != nil {
		return time.Time{}, false
	}
	return time.Unix(s, 0), true
}
