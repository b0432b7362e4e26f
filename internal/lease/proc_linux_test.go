package lease

import (
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseProcLocks(t *testing.T) {
	b := []byte(`1: FLOCK  ADVISORY  WRITE 8705 fe:00:9978714 0 EOF
1: -> FLOCK  ADVISORY  WRITE 8706 fe:00:9978714 0 EOF
2: POSIX  ADVISORY  WRITE 123 fe:00:9978714 0 EOF
3: OFDLCK ADVISORY  READ  -1 00:1a:42 0 EOF
4: FLOCK  ADVISORY  READ  77 00:1a:42 0 EOF
5: FLOCK  ADVISORY  WRITE junk 00:1a:42 0 EOF
6: FLOCK  ADVISORY  WRITE 78 00:1a 0 EOF
`)
	got := parseProcLocks(b)
	want := []procLock{
		{pid: 8705, write: true, major: 0xfe, minor: 0, ino: 9978714},
		{pid: 77, write: false, major: 0, minor: 0x1a, ino: 42},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("parseProcLocks = %+v, want %+v", got, want)
	}
	st := unix.Stat_t{Dev: unix.Mkdev(0xfe, 0), Ino: 9978714}
	if pid := lockPID(got, &st); pid != 8705 {
		t.Errorf("lockPID = %d, want 8705 (the granted flock, not the waiter nor the fcntl lock)", pid)
	}
	// A shared lock counts when no exclusive one is listed.
	st = unix.Stat_t{Dev: unix.Mkdev(0, 0x1a), Ino: 42}
	if pid := lockPID(append([]procLock{{pid: 5, major: 0, minor: 0x1a, ino: 42}}, got...), &st); pid != 5 {
		t.Errorf("lockPID = %d, want the first shared holder", pid)
	}
	st.Ino = 43
	if pid := lockPID(got, &st); pid != 0 {
		t.Errorf("lockPID of an unlocked file = %d", pid)
	}
}

func TestProcParsers(t *testing.T) {
	boot := time.Unix(1700000000, 0)
	// The command name may hold spaces and parentheses; field 22 is 12345.
	stat := []byte("4242 (evil) (x y) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 12345 99 100\n")
	if got := startTime(stat, boot); !got.Equal(boot.Add(123450 * time.Millisecond)) {
		t.Errorf("startTime = %v, want boot + 123.45s", got)
	}
	if got := startTime([]byte("4242 (short) S 1"), boot); !got.IsZero() {
		t.Errorf("startTime of a short line = %v, want zero", got)
	}
	if uid, ok := statusUID([]byte("Name:\tx\nUid:\t1001\t0\t0\t0\nGid:\t5\n")); !ok || uid != 1001 {
		t.Errorf("statusUID = %d, %v; want the real uid 1001", uid, ok)
	}
	if _, ok := statusUID([]byte("Name:\tx\n")); ok {
		t.Error("statusUID without a Uid line")
	}
	if bt, ok := parseBootTime([]byte("cpu 1 2\nbtime 1700000000\nprocesses 5\n")); !ok || !bt.Equal(boot) {
		t.Errorf("parseBootTime = %v, %v", bt, ok)
	}
}

// TestProcHolderSelf: this process, as the kernel describes it.
func TestProcHolderSelf(t *testing.T) {
	h := procHolder(os.Getpid())
	if h.PID != os.Getpid() || h.UID != os.Getuid() || h.Gone || !strings.HasPrefix(h.Command, os.Args[0]) {
		t.Errorf("procHolder(self) = %+v", h)
	}
	if h.Start.IsZero() || h.Start.After(time.Now()) {
		t.Errorf("start %v", h.Start)
	}
	// A pid that does not exist: gone, nothing made up.
	h = procHolder(1 << 30)
	if !h.Gone || h.UID != -1 || h.User != "" || h.Command != "" || !h.Start.IsZero() {
		t.Errorf("procHolder(no such pid) = %+v", h)
	}
}

// fdinfoCapture is /proc/PID/fdinfo/3 of util-linux flock(1) holding
// flock -x on a file, captured on the development VM (Linux 6.18): the
// "lock:" line is in /proc/locks' format.
const fdinfoCapture = "pos:\t0\nflags:\t0100000\nmnt_id:\t27\nino:\t9977906\nlock:\t1: FLOCK  ADVISORY  WRITE 1001 fe:00:9977906 0 EOF\n"

func TestLockLine(t *testing.T) {
	st := unix.Stat_t{Dev: unix.Mkdev(0xfe, 0), Ino: 9977906}
	if !lockLine([]byte(fdinfoCapture), &st) {
		t.Error("the captured fdinfo's lock line not found")
	}
	other := st
	other.Ino++
	if lockLine([]byte(fdinfoCapture), &other) {
		t.Error("a lock line for another inode matched")
	}
	noLock := strings.SplitN(fdinfoCapture, "lock:", 2)[0]
	if lockLine([]byte(noLock), &st) {
		t.Error("matched an fdinfo without a lock line")
	}
	posix := strings.Replace(fdinfoCapture, "FLOCK ", "POSIX ", 1)
	if lockLine([]byte(posix), &st) {
		t.Error("an fcntl lock counted as the lease's flock")
	}
}

func TestParseTicket(t *testing.T) {
	for _, c := range []struct {
		in   string
		need int
		ok   bool
	}{
		{"{\"need\":2}\n", 2, true}, {`{"need":8}`, 8, true}, {`{"need":9}`, 0, false},
		{`{"need":0}`, 0, false}, {`{"need":-1}`, 0, false}, {`{"need":"all"}`, 0, false},
		{``, 0, false}, {`{}`, 0, false}, {`{"need":2`, 0, false},
	} {
		if need, ok := parseTicket([]byte(c.in), 8); need != c.need || ok != c.ok {
			t.Errorf("parseTicket(%q) = %d, %v; want %d, %v", c.in, need, ok, c.need, c.ok)
		}
	}
}

// FuzzProcFiles: the readers of what the kernel and other users write
// (/proc/locks, fdinfo, status, stat, tickets) never panic, and what
// they accept is in range.
func FuzzProcFiles(f *testing.F) {
	f.Add([]byte(fdinfoCapture))
	f.Add([]byte("1: FLOCK  ADVISORY  WRITE 8705 fe:00:9978714 0 EOF\n1: -> FLOCK  ADVISORY  WRITE 1 fe:00:1 0 EOF\n"))
	f.Add([]byte("Name:\tx\nUid:\t1000\t1001\t1001\t1001\n"))
	f.Add([]byte("42 (a) b) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 1234 20\n"))
	f.Add([]byte(`{"need":3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, l := range parseProcLocks(b) {
			if l.major > 0xffffffff || l.minor > 0xffffffff {
				t.Errorf("device number out of range: %+v", l)
			}
		}
		st := unix.Stat_t{Dev: unix.Mkdev(0xfe, 0), Ino: 9977906}
		_ = lockLine(b, &st)
		if uid, ok := statusEUID(b); ok && uid < 0 {
			t.Errorf("negative uid %d", uid)
		}
		if uid, ok := statusUID(b); ok && uid < 0 {
			t.Errorf("negative uid %d", uid)
		}
		_, _ = startTicks(b)
		if need, ok := parseTicket(b, 8); ok && (need < 1 || need > 8) {
			t.Errorf("need %d accepted", need)
		}
	})
}
