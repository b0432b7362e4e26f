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
		{pid: 8705, write: true, fileID: fileID{0xfe, 0, 9978714}},
		{pid: 77, write: false, fileID: fileID{0, 0x1a, 42}},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("parseProcLocks = %+v, want %+v", got, want)
	}
	if pid := lockPID(got, fileID{0xfe, 0, 9978714}); pid != 8705 {
		t.Errorf("lockPID = %d, want 8705 (the granted flock, not the waiter nor the fcntl lock)", pid)
	}
	// A shared lock counts when no exclusive one is listed.
	if pid := lockPID(append([]procLock{{pid: 5, fileID: fileID{0, 0x1a, 42}}}, got...), fileID{0, 0x1a, 42}); pid != 5 {
		t.Errorf("lockPID = %d, want the first shared holder", pid)
	}
	if pid := lockPID(got, fileID{0, 0x1a, 43}); pid != 0 {
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
	st := fileID{0xfe, 0, 9977906}
	if !lockLine([]byte(fdinfoCapture), st) {
		t.Error("the captured fdinfo's lock line not found")
	}
	other := st
	other.ino++
	if lockLine([]byte(fdinfoCapture), other) {
		t.Error("a lock line for another inode matched")
	}
	noLock := strings.SplitN(fdinfoCapture, "lock:", 2)[0]
	if lockLine([]byte(noLock), st) {
		t.Error("matched an fdinfo without a lock line")
	}
	posix := strings.Replace(fdinfoCapture, "FLOCK ", "POSIX ", 1)
	if lockLine([]byte(posix), st) {
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
		_ = lockLine(b, fileID{0xfe, 0, 9977906})
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

// TestLockDevOnBtrfs: on a btrfs subvolume stat gives a device (0:42)
// that /proc/locks never prints (it prints the file system's, 00:28), so
// a lease file is found by the device learnt from this process's own
// shared lock on the directory (inode 256). Lines 1 and 2 are as
// /proc/locks showed them on the development VM (Linux 6.18, a
// subvolume of a btrfs on a loop file; pids renumbered), 3 and 4 are
// another process's shared lock and this one's write lock on another
// file system's inode 256.
func TestLockDevOnBtrfs(t *testing.T) {
	locks := parseProcLocks([]byte(`1: FLOCK  ADVISORY  READ  100 00:28:256 0 EOF
2: FLOCK  ADVISORY  WRITE 200 00:28:258 0 EOF
3: FLOCK  ADVISORY  READ  300 00:28:256 0 EOF
4: FLOCK  ADVISORY  WRITE 100 fe:00:256 0 EOF
`))
	leaseFile := unix.Stat_t{Dev: unix.Mkdev(0, 42), Ino: 258}
	if pid := lockPID(locks, statID(&leaseFile)); pid != 0 {
		t.Fatalf("stat's device matched /proc/locks (pid %d): the capture no longer shows the case", pid)
	}
	dev, ok := ownLock(locks, 100, 256)
	if !ok || dev != (fileID{0, 0x28, 0}) {
		t.Fatalf("ownLock = %+v, %v; want device 00:28 (this process's shared lock, not its write lock nor pid 300's)", dev, ok)
	}
	n := lockNames{dev: dev, ok: true}
	n.once.Do(func() {})
	if pid := lockPID(locks, n.id(-1, &leaseFile)); pid != 200 {
		t.Errorf("lockPID by the learnt device = %d, want 200", pid)
	}
	// Shared locks of this process on two devices' inode 256: nothing
	// learnt, stat's device is used.
	two := append(locks, procLock{pid: 100, fileID: fileID{0, 0x29, 256}})
	if _, ok := ownLock(two, 100, 256); ok {
		t.Error("ownLock chose between two devices")
	}
	if _, ok := ownLock(locks, 200, 258); ok {
		t.Error("ownLock took a write lock for the directory's")
	}
}

// TestLockNamesHere: on this test's own file system the device learnt
// from the kernel is stat's (ext4, tmpfs), and the lock it took is gone.
func TestLockNamesHere(t *testing.T) {
	d, _ := openTemp(t)
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		t.Fatal(err)
	}
	if got := d.id(&st); !d.names.ok || got != statID(&st) {
		t.Errorf("learnt %+v (ok %v), stat says %+v", got, d.names.ok, statID(&st))
	}
	if _, ok := ownLock(readProcLocks(), os.Getpid(), st.Ino); ok {
		t.Error("the shared lock on the directory outlived the look")
	}
}
