package lease

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amdrun/amdrun/internal/printable"
)

// Who holds a lease comes from the kernel: /proc/locks gives the pid that
// took the flock on the lease file's inode, /proc/<pid> that process's
// real uid, command line and start time. Nothing a holder wrote is
// believed. (F_OFD_GETLK cannot answer: on Linux it sees only fcntl
// locks, never flock(2) ones.)

// procLock is one granted flock of /proc/locks.
type procLock struct {
	pid               int
	write             bool
	major, minor, ino uint64
}

// maxProcFile bounds what is read of one /proc file; a command line can
// be megabytes long and only its start is ever shown.
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
	b, err := readProcFile("/proc/locks", 16<<20)
	if err != nil {
		return nil
	}
	return parseProcLocks(b)
}

// parseProcLocks reads the flock lines of /proc/locks, like
// "1: FLOCK  ADVISORY  WRITE 8705 fe:00:9978714 0 EOF". Blocked waiters
// ("1: -> FLOCK ...") hold nothing and are skipped, as are fcntl locks.
func parseProcLocks(b []byte) []procLock {
	var out []procLock
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
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
		out = append(out, procLock{pid: pid, write: f[3] == "WRITE", major: maj, minor: mnr, ino: ino})
	}
	return out
}

// lockPID is the pid holding a flock on the file st, preferring an
// exclusive lock (a lease) over a shared one; 0 when none is listed or
// the holder is outside this pid namespace.
func lockPID(locks []procLock, st *unix.Stat_t) int {
	pid := 0
	for _, l := range locks {
		if l.ino == st.Ino && l.major == uint64(unix.Major(st.Dev)) && l.minor == uint64(unix.Minor(st.Dev)) {
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

func lockHolder(locks []procLock, st *unix.Stat_t) Holder {
	return procHolder(lockPID(locks, st))
}

// procHolder describes pid from /proc: its real uid, its command line
// (printable, at most 200 runes) and when it started.
func procHolder(pid int) Holder {
	h := Holder{PID: pid, UID: -1}
	if pid <= 0 {
		return h
	}
	dir := "/proc/" + strconv.Itoa(pid)
	status, err := readProcFile(dir+"/status", 64<<10)
	if err != nil {
		// Gone, unless /proc hides other users' processes (hidepid).
		h.Gone = errors.Is(unix.Kill(pid, 0), unix.ESRCH)
		return h
	}
	if uid, ok := statusUID(status); ok {
		h.UID = uid
		h.User = userName(uid)
	}
	if b, err := readProcFile(dir+"/cmdline", maxProcFile); err == nil {
		h.Command = printable.String(strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " ")), 200)
	}
	if b, err := readProcFile(dir+"/stat", 64<<10); err == nil {
		if bt, ok := bootTime(); ok {
			h.Start = startTime(b, bt)
		}
	}
	return h
}

// statusUID is the real uid on the "Uid:" line of /proc/<pid>/status.
func statusUID(b []byte) (int, bool) {
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0, false
			}
			uid, err := strconv.Atoi(f[0])
			return uid, err == nil && uid >= 0
		}
	}
	return 0, false
}

// userHZ is the unit of /proc/<pid>/stat's start time: USER_HZ, 100 on
// every Linux ABI amdrun builds for (sysconf(_SC_CLK_TCK) needs cgo).
const userHZ = 100

// startTime reads field 22 of /proc/<pid>/stat (clock ticks after boot)
// as a wall-clock time; zero when it cannot. The command name (field 2)
// may hold spaces and parentheses, so fields are counted after the last
// ')'.
func startTime(stat []byte, boot time.Time) time.Time {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return time.Time{}
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state): field 22 is f[19].
	if len(f) < 20 {
		return time.Time{}
	}
	ticks, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return time.Time{}
	}
	return boot.Add(time.Duration(ticks) * (time.Second / userHZ))
}

var (
	bootOnce sync.Once
	boot     time.Time
	bootOK   bool
)

// bootTime is the "btime" of /proc/stat, read once.
func bootTime() (time.Time, bool) {
	bootOnce.Do(func() {
		if b, err := readProcFile("/proc/stat", 1<<20); err == nil {
			boot, bootOK = parseBootTime(b)
		}
	})
	return boot, bootOK
}

func parseBootTime(b []byte) (time.Time, bool) {
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "btime "); ok {
			s, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			if err != nil {
				return time.Time{}, false
			}
			return time.Unix(s, 0), true
		}
	}
	return time.Time{}, false
}
