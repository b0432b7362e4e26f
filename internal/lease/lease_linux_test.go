package lease

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amdrun/amdrun/internal/printable"
	"github.com/amdrun/amdrun/internal/testutil"
)

// The test binary re-executes itself as the other jobs of the node; the
// environment variable picks what the child does.
const childEnv = "AMDRUN_LEASE_TEST_CHILD"

func TestMain(m *testing.M) {
	testutil.Main(m, testutil.Role{Env: childEnv, Run: func(mode string, _ []string) int { return runChild(mode) }})
}

func runChild(mode string) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "child %s: "+format+"\n", append([]any{mode}, args...)...)
		return 2
	}
	d, err := Open(os.Getenv("LEASE_DIR"), Options{})
	if err != nil {
		return fail("%v", err)
	}
	keys := strings.Split(os.Getenv("LEASE_KEYS"), ",")
	switch mode {
	case "hold":
		// Lease LEASE_KEYS, say "ready", and keep the lease until stdin ends
		// (or a SIGKILL).
		l, err := d.Acquire(keys)
		if err != nil {
			return fail("%v", err)
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		l.Release()
	case "ticket":
		// Take a ticket for LEASE_N devices (1 when unset), say "ready",
		// and keep it until stdin ends: a waiter that never takes devices.
		n, _ := strconv.Atoi(os.Getenv("LEASE_N"))
		tk, err := d.Enqueue(max(n, 1), 8)
		if err != nil {
			return fail("%v", err)
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		tk.Done()
	case "fake":
		// Make and lock a file in the queue named by LEASE_NAME, where
		// {uid}, {pid} and {start} are this process's, holding
		// LEASE_CONTENT; say "ready" and keep it until stdin ends.
		return runFake(d)
	case "handoff":
		// Lease LEASE_KEYS, hand the lock files to /bin/sleep (an outside
		// process, ExtraFiles), print its pid, and exit at once.
		return runHandoff(d, keys)
	case "worker":
		return runWorker(d, keys)
	default:
		return fail("unknown mode")
	}
	return 0
}

// workerResult is what a "worker" child prints: the keys it leased and
// when it held them (taken after Acquire and before Release, so the true
// hold spans at least this).
type workerResult struct {
	PID        int
	Keys       []string
	Start, End int64
	Violation  string
}

// runWorker claims 2 free keys out of LEASE_KEYS (waiting in the queue
// when LEASE_POLL_MS > 0, else retrying), holds them LEASE_HOLD_MS and
// releases. LEASE_N > 2 claims that many instead. LEASE_LOG gets a line
// per worker in the order they were served.
func runWorker(d *Dir, keys []string) int {
	hold, _ := strconv.Atoi(os.Getenv("LEASE_HOLD_MS"))
	poll, _ := strconv.Atoi(os.Getenv("LEASE_POLL_MS"))
	n, _ := strconv.Atoi(os.Getenv("LEASE_N"))
	if n == 0 {
		n = 2
	}
	choose := func(held map[string]State) ([]string, error) {
		var free []string
		for _, k := range keys {
			if _, ok := held[k]; !ok {
				free = append(free, k)
			}
		}
		if len(free) < n {
			return nil, fmt.Errorf("only %d free: %w", len(free), ErrBusy)
		}
		return free[:n], nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := d.Claim(ctx, keys, n, choose, time.Duration(poll)*time.Millisecond)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	res := workerResult{PID: os.Getpid(), Keys: append([]string(nil), l.keys...), Start: time.Now().UnixNano()}
	if log := os.Getenv("LEASE_LOG"); log != "" {
		f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err == nil {
			fmt.Fprintln(f, os.Getenv("LEASE_NAME"))
			f.Close()
		}
	}
	// A marker per key, made exclusively: if two workers ever held a key
	// at once, the second would find the first's marker.
	mark := os.Getenv("LEASE_MARK")
	for _, k := range res.Keys {
		f, err := os.OpenFile(filepath.Join(mark, k), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			res.Violation += fmt.Sprintf("%s: %v; ", k, err)
			continue
		}
		f.Close()
	}
	time.Sleep(time.Duration(hold) * time.Millisecond)
	for _, k := range res.Keys {
		os.Remove(filepath.Join(mark, k))
	}
	res.End = time.Now().UnixNano()
	if err := l.Release(); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// child starts the test binary as a child in mode.
func child(t *testing.T, mode, dir string, keys []string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, "LEASE_DIR="+dir, "LEASE_KEYS="+strings.Join(keys, ","))
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	return cmd
}

// startHolder starts a child in mode ("hold" or "ticket") and returns once
// it says "ready", with env added to its environment. Closing stdin ends
// it; the cleanup kills it anyway.
func startHolder(t *testing.T, mode, dir string, keys []string, env ...string) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := child(t, mode, dir, keys, env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("child %s: got %q, %v; want ready", mode, line, err)
	}
	return cmd, stdin
}

// warnings collects what a Dir warns.
type warnings []string

func (w *warnings) warn(f string, a ...any) { *w = append(*w, fmt.Sprintf(f, a...)) }

// openIn opens (creating) the lease directory path, collecting warnings.
func openIn(t *testing.T, path string) (*Dir, *warnings) {
	t.Helper()
	w := &warnings{}
	d, err := Open(path, Options{Warn: w.warn, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, w
}

// openTemp opens a new shared (01777) lease directory.
func openTemp(t *testing.T) (*Dir, *warnings) {
	t.Helper()
	return openIn(t, filepath.Join(t.TempDir(), "leases"))
}

// openOwned opens a new lease directory owned by this user, mode 0755:
// no warning, this user's jobs make the lock files.
func openOwned(t *testing.T) *Dir {
	t.Helper()
	path := filepath.Join(t.TempDir(), "leases")
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	d, w := openIn(t, path)
	if len(*w) != 0 || d.Mode() != Owned || d.Degraded() != "" {
		t.Fatalf("own 0755 directory: mode %v, degraded %q, warnings %q", d.Mode(), d.Degraded(), *w)
	}
	return d
}

func keysN(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("0000:%02x:00.0", 0x0c+i)
	}
	return keys
}

// Step 1: opening the directory.

func TestOpenCreatesSharedDir(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "run", "lock", "amdrun")
	d, w := openIn(t, path)
	if d.Path() != path {
		t.Errorf("Path() = %q, want %q", d.Path(), path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode() & (fs.ModePerm | fs.ModeSticky); got != fs.ModeSticky|0o777 {
		t.Errorf("mode = %v, want sticky 0777 (01777)", got)
	}
	// Every user can write it: the degraded mode, in one line; no job
	// prints it while no other user has used the directory (issue 31).
	if g := d.Degraded(); d.Mode() != Shared || len(*w) != 0 || !strings.Contains(g, "not root-prepared (degraded mode") ||
		!strings.Contains(g, "amdrun lease init") || strings.Contains(g, "\n") {
		t.Errorf("mode %v, degraded %q, warnings %q", d.Mode(), g, *w)
	}
}

// TestDegradedNoticeOncePerBoot: in a directory every user can write,
// the degraded-mode line is printed once another user has used it, by
// the first job of this boot only; Degraded (doctor's) always says it
// (issue 31: every job printed it, forever, on a one-user GPU box).
func TestDegradedNoticeOncePerBoot(t *testing.T) {
	testutil.RequireRoot(t) // to leave a file of another user's
	if _, err := os.Stat(bootIDPath); err != nil {
		t.Skipf("no boot id: %v", err)
	}
	path := filepath.Join(t.TempDir(), "leases")
	d, _ := openIn(t, path)
	if _, err := d.Acquire([]string{"gpu0"}); err != nil {
		t.Fatal(err)
	}
	if _, w := openIn(t, path); len(*w) != 0 {
		t.Fatalf("only this user used it: warnings %q", *w)
	}
	other := filepath.Join(path, "gpu1.lock")
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(other, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	d, w := openIn(t, path)
	if len(*w) != 1 || (*w)[0] != d.Degraded() {
		t.Fatalf("first job after another user's: warnings %q, want %q", *w, d.Degraded())
	}
	for range 2 {
		if d, w = openIn(t, path); len(*w) != 0 || d.Degraded() == "" {
			t.Errorf("later job of this boot: warnings %q, degraded %q", *w, d.Degraded())
		}
	}
	ents, _ := filepath.Glob(filepath.Join(path, noticePrefix+"*"))
	if len(ents) != 1 {
		t.Errorf("notice markers %q, want one", ents)
	}
}

func TestOpenModes(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, perm os.FileMode) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, perm); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tt := range []struct {
		name     string
		perm     os.FileMode
		mode     Mode
		degraded []string
	}{
		{"private", 0o755, Owned, nil},
		{"sticky", 0o777 | fs.ModeSticky, Shared, []string{"not root-prepared"}},
		{"not-sticky", 0o777, Shared, []string{"not root-prepared", "without the sticky bit any user can delete any lease file"}},
		{"group-writable", 0o775, Shared, []string{"not root-prepared"}},
	} {
		d, w := openIn(t, mk(tt.name, tt.perm))
		if d.Mode() != tt.mode || d.Owner() != os.Geteuid() {
			t.Errorf("%s: mode %v owner %d, want %v owned by us", tt.name, d.Mode(), d.Owner(), tt.mode)
		}
		for _, want := range tt.degraded {
			if !strings.Contains(d.Degraded(), want) {
				t.Errorf("%s: Degraded() = %q, want it to say %q", tt.name, d.Degraded(), want)
			}
		}
		if len(tt.degraded) == 0 && (d.Degraded() != "" || len(*w) != 0) {
			t.Errorf("%s: Degraded() = %q, warnings %q; want none", tt.name, d.Degraded(), *w)
		}
	}
	// A missing directory, not created: nothing held, nothing made.
	missing := filepath.Join(base, "missing")
	d, err := Open(missing, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if held, err := d.Held(keysN(2)); err != nil || len(held) != 0 {
		t.Errorf("Held in a missing directory = %v, %v", held, err)
	}
	if _, err := os.Lstat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open without Create made %s: %v", missing, err)
	}
	if _, err := d.Acquire(keysN(1)); err == nil {
		t.Error("Acquire in a missing directory did not fail")
	}
}

func TestOpenRefuses(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	me := ownerName(os.Geteuid())
	tests := []struct {
		path, want string
	}{
		{link, link + ": unsafe path: lease directory is a symlink (owned by " + me + ")"},
		{file, file + ": unsafe path: not a directory"},
		{filepath.Join(file, "x"), file + ": unsafe path: not a directory"},
		{"", "lease: empty lease directory path"},
		{"/", "/ cannot be a lease directory"},
	}
	for _, tt := range tests {
		_, err := Open(tt.path, Options{Create: true})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Open(%q) = %v, want error containing %q", tt.path, err, tt.want)
		}
	}
}

// TestOpenSymlinkOnTheWay: a symlink above the lease directory is
// followed where only this user (or root) can have put it, and refused in
// a directory other users can write.
func TestOpenSymlinkOnTheWay(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	if err := os.MkdirAll(filepath.Join(real, "leases"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(base, "safe")); err != nil {
		t.Fatal(err)
	}
	d, err := Open(filepath.Join(base, "safe", "leases"), Options{})
	if err != nil {
		t.Fatalf("symlink in our own 0700 directory: %v", err)
	}
	var st unix.Stat_t
	unix.Stat(filepath.Join(real, "leases"), &st)
	if d.ino != st.Ino {
		t.Error("did not open the symlink's target")
	}
	d.Close()
	// The same symlink in a world-writable, non-sticky directory: anyone
	// could have swapped it.
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	if err := os.Symlink(real, filepath.Join(open, "l")); err != nil {
		t.Fatal(err)
	}
	_, err = Open(filepath.Join(open, "l", "leases"), Options{})
	if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "a symlink in "+open) || !strings.Contains(err.Error(), "not followed") {
		t.Errorf("symlink in a world-writable directory: %v", err)
	}
	// ".." in a symlink's target is resolved on the way, as the kernel does.
	if err := os.Symlink("../real", filepath.Join(real, "up")); err != nil {
		t.Fatal(err)
	}
	if d, err := Open(filepath.Join(real, "up", "leases"), Options{}); err != nil || d.ino != st.Ino {
		t.Errorf("symlink with ..: %v", err)
	}
}

// TestOpenUnsteadyParent: a lease directory owned by this user inside a
// directory another user owns is degraded: that user can swap it.
func TestOpenUnsteadyParent(t *testing.T) {
	testutil.RequireRoot(t)
	base := t.TempDir()
	parent := filepath.Join(base, "theirs")
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(parent, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	leases := filepath.Join(parent, "leases")
	if err := os.Mkdir(leases, 0o755); err != nil {
		t.Fatal(err)
	}
	d, w := openIn(t, leases)
	if d.Mode() != Owned || !strings.Contains(d.Degraded(), "can be changed by "+ownerName(65534)+" ("+parent+")") || len(*w) != 1 {
		t.Errorf("mode %v, degraded %q, warnings %q", d.Mode(), d.Degraded(), *w)
	}
	// A directory another user owns and nobody else can write: that user
	// can take devices other users' jobs hold there.
	os.Chown(parent, 0, 0)
	os.Chown(leases, 65534, 65534)
	d, _ = openIn(t, leases)
	if !strings.Contains(d.Degraded(), "belongs to "+ownerName(65534)) {
		t.Errorf("degraded %q", d.Degraded())
	}
}

// Step 2: a lease file, and what is not one.

// TestAcquireHeldRelease: in one process, two opens of the directory
// exclude each other as two jobs would; Held names the holder as the
// kernel knows it; Release frees at once; the files stay and are empty.
func TestAcquireHeldRelease(t *testing.T) {
	d := openOwned(t)
	other, _ := openIn(t, d.Path())
	keys := keysN(3)
	l, err := d.Acquire(keys[:2])
	if err != nil {
		t.Fatal(err)
	}
	held, err := other.Held(keys)
	if err != nil || len(held) != 2 {
		t.Fatalf("Held = %v, %v; want %q", held, err, keys[:2])
	}
	cmdline, _ := os.ReadFile("/proc/self/cmdline")
	wantCmd := printable.String(strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " ")), 200)
	for _, k := range keys[:2] {
		h := held[k].Holder
		if held[k].Fault != nil || h.PID != os.Getpid() || h.UID != os.Getuid() || h.User != userName(os.Getuid()) || h.Command != wantCmd {
			t.Errorf("Held[%s] = %+v, want this process (pid %d, uid %d, %q)", k, held[k], os.Getpid(), os.Getuid(), wantCmd)
		}
		if h.Start.IsZero() || h.Start.After(time.Now()) || time.Since(h.Start) > time.Hour {
			t.Errorf("Held[%s].Start = %v, want this process's start", k, h.Start)
		}
	}
	// All or nothing, and the error names the holder.
	_, err = other.Acquire(keys[1:])
	want := fmt.Sprintf("lease: %s: device is leased by another process: held by pid %d (", keys[1], os.Getpid())
	if !errors.Is(err, ErrBusy) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Acquire of a held key: %v, want prefix %q", err, want)
	}
	if held, _ := other.Held(keys[2:]); len(held) != 0 {
		t.Errorf("a failed Acquire left %v held", held)
	}
	l.Release()
	l.Release() // twice is fine
	if held, _ := other.Held(keys); len(held) != 0 {
		t.Errorf("after Release Held = %v", held)
	}
	for _, k := range keys[:2] {
		fi, err := os.Stat(filepath.Join(d.Path(), k+".lock"))
		if err != nil || fi.Size() != 0 || fi.Mode().Perm() != 0o644 {
			t.Errorf("lease file %s: %v, %v; want an empty 0644 file left in place", k, fi, err)
		}
	}
	all, err := heldAll(other)
	if err != nil || len(all) != 0 {
		t.Errorf("held in the directory: %v, %v", all, err)
	}
}

// TestFilesOutliveRelease: the duplicates Files hands out keep the
// devices leased after Release, until the last of them is closed.
func TestFilesOutliveRelease(t *testing.T) {
	d := openOwned(t)
	keys := keysN(2)
	l, err := d.Acquire(keys)
	if err != nil {
		t.Fatal(err)
	}
	files, err := l.Files()
	if err != nil || len(files) != 2 {
		t.Fatalf("Files() = %v, %v", files, err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Files(); err == nil {
		t.Error("Files() after Release did not fail")
	}
	if _, err := d.Acquire(keys[1:]); !errors.Is(err, ErrBusy) {
		t.Fatalf("Acquire while a duplicate is open = %v, want ErrBusy", err)
	}
	files[0].Close()
	if _, err := d.Acquire(keys[1:]); !errors.Is(err, ErrBusy) {
		t.Fatalf("Acquire while the other key's duplicate is open = %v, want ErrBusy", err)
	}
	files[1].Close()
	l2, err := d.Acquire(keys)
	if err != nil {
		t.Fatalf("Acquire after every duplicate was closed: %v", err)
	}
	l2.Release()
}

// TestSharedLockCountsAsHeld: a shared lock kept on a lease file (which
// would make every Acquire of it fail) shows the device as held, so it is
// left out instead of chosen and failed on.
func TestSharedLockCountsAsHeld(t *testing.T) {
	d := openOwned(t)
	l, err := d.Acquire([]string{"gpu0"}) // makes the file
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	fd, err := unix.Open(filepath.Join(d.Path(), "gpu0.lock"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	held, _ := d.Held([]string{"gpu0", "gpu1"})
	if s, ok := held["gpu0"]; !ok || s.Holder.PID != os.Getpid() || len(held) != 1 {
		t.Errorf("Held = %v, want gpu0 held (shared) by us", held)
	}
	if _, err := d.Acquire([]string{"gpu0"}); !errors.Is(err, ErrBusy) {
		t.Errorf("Acquire = %v, want ErrBusy", err)
	}
}

// TestFaultsStayLocal: whatever is planted at one device's lease path (a
// symlink to a file elsewhere, a dangling one, a FIFO, a directory, a
// hard link), only that device is unavailable: Held reports it with one
// warning naming the path and its owner, the other devices are leased as
// usual, nothing is followed, written or blocked on.
func TestFaultsStayLocal(t *testing.T) {
	d, w := openTemp(t)
	*w = nil
	outside := t.TempDir()
	target := filepath.Join(outside, "precious")
	if err := os.WriteFile(target, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	os.Chtimes(target, mtime, mtime)
	p := func(k string) string { return filepath.Join(d.Path(), k+".lock") }
	plant := map[string]func() error{
		"gpu0": func() error { return os.Symlink(target, p("gpu0")) },
		"gpu1": func() error { return os.Symlink(filepath.Join(outside, "absent"), p("gpu1")) },
		"gpu2": func() error { return syscall.Mkfifo(p("gpu2"), 0o666) },
		"gpu3": func() error { return os.Mkdir(p("gpu3"), 0o755) },
		"gpu4": func() error { return os.Link(target, p("gpu4")) },
	}
	kinds := map[string]string{"gpu0": "a symlink", "gpu1": "a symlink", "gpu2": "a FIFO", "gpu3": "a directory", "gpu4": "a file with 2 links"}
	for _, f := range plant {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	keys := []string{"gpu0", "gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6"}
	for range 3 { // a --wait loop asks again and again: still one warning each
		held, err := d.Held(keys)
		if err != nil {
			t.Fatalf("Held: %v", err)
		}
		if len(held) != 5 {
			t.Fatalf("Held = %v, want the 5 planted keys", held)
		}
		for k, kind := range kinds {
			want := fmt.Sprintf("lease: %s: unsafe path: %s owned by %s", p(k), kind, ownerName(os.Geteuid()))
			if f := held[k].Fault; !errors.Is(f, ErrUnsafe) || f.Error() != want {
				t.Errorf("Held[%s].Fault = %v, want %q", k, f, want)
			}
		}
	}
	if len(*w) != 5 {
		t.Errorf("%d warnings, want one per planted path: %q", len(*w), *w)
	}
	for _, line := range *w {
		if !strings.Contains(line, d.Path()) || !strings.Contains(line, "owned by") || !strings.Contains(line, "cannot be leased") {
			t.Errorf("warning %q should name the path, its owner and the device", line)
		}
	}
	// The others are leased as usual; a planted one is refused by name.
	l, err := d.Acquire([]string{"gpu5", "gpu6"})
	if err != nil {
		t.Fatalf("Acquire of the untouched devices: %v", err)
	}
	l.Release()
	for k := range plant {
		if _, err := d.Acquire([]string{"gpu5", k}); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), p(k)) {
			t.Errorf("Acquire(%s) = %v, want ErrUnsafe naming %s", k, err, p(k))
		}
	}
	if held, _ := d.Held([]string{"gpu5"}); len(held) != 0 {
		t.Errorf("gpu5 left held after a failed Acquire: %v", held)
	}
	fi, _ := os.Stat(target)
	if b, _ := os.ReadFile(target); string(b) != "precious\n" || !fi.ModTime().Equal(mtime) {
		t.Errorf("target changed: %q, mtime %v", b, fi.ModTime())
	}
	if _, err := os.Lstat(filepath.Join(outside, "absent")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("dangling symlink target was created: %v", err)
	}
}

// TestOtherUsersUnreadableFile: another user's 0600 file at a lease path
// is a fault for a user who cannot read it, and leased (never written) by
// root, who can.
func TestOtherUsersUnreadableFile(t *testing.T) {
	testutil.RequireRoot(t)
	d, _ := openTemp(t)
	path := filepath.Join(d.Path(), "gpu0.lock")
	os.WriteFile(path, []byte("junk\n"), 0o600)
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	l, err := d.Acquire([]string{"gpu0"})
	if err != nil {
		t.Fatal(err)
	}
	held, _ := openTempSame(t, d).Held([]string{"gpu0"})
	if h := held["gpu0"].Holder; h.PID != os.Getpid() || h.UID != 0 {
		t.Errorf("Held = %+v, want us", held["gpu0"])
	}
	l.Release()
	if b, _ := os.ReadFile(path); string(b) != "junk\n" {
		t.Errorf("another user's file was written: %q", b)
	}
}

func openTempSame(t *testing.T, d *Dir) *Dir {
	t.Helper()
	o, _ := openIn(t, d.Path())
	return o
}

// TestCreatedFilesReadableByAll: a lease file made under a strict umask is
// 0644 all the same, or other users' jobs could not lock it.
func TestCreatedFilesReadableByAll(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	d, _ := openTemp(t)
	l, err := d.Acquire([]string{"gpu0"})
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if fi, err := os.Stat(filepath.Join(d.Path(), "gpu0.lock")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("lease file mode %v, %v; want 0644", fi.Mode(), err)
	}
}

func TestAcquireBadKeys(t *testing.T) {
	d, _ := openTemp(t)
	for _, keys := range [][]string{nil, {"gpu0", "gpu0"}, {""}} {
		if _, err := d.Acquire(keys); !errors.Is(err, ErrBadKey) {
			t.Errorf("Acquire(%q) = %v, want ErrBadKey", keys, err)
		}
	}
	if held, _ := d.Held([]string{"gpu0"}); len(held) != 0 {
		t.Errorf("Held = %v after refused Acquire", held)
	}
}

// Step 3: the node lock.

func TestLockEndsWithContextNamingHolder(t *testing.T) {
	d := openOwned(t)
	other, _ := openIn(t, d.Path())
	unlock, err := d.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// A deadline already past: Lock tries once and gives up, no real wait
	// (TestReserveNodeLockDeadline waits in real time, end to end).
	ctx, cancel := context.WithDeadline(context.Background(), time.Now())
	defer cancel()
	_, err = other.Lock(ctx)
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Lock = %v, want a *LockedError", err)
	}
	if le.Holder.PID != os.Getpid() || le.Path != filepath.Join(d.Path(), ".lock") || le.Waited < 0 {
		t.Errorf("LockedError %+v", le)
	}
	if !strings.HasPrefix(err.Error(), fmt.Sprintf("lease: the node lock %s/.lock stayed held by pid %d (", d.Path(), os.Getpid())) {
		t.Errorf("message %q", err)
	}
	unlock()
	unlock()
	unlock2, err := other.Lock(context.Background())
	if err != nil {
		t.Fatalf("Lock after unlock: %v", err)
	}
	unlock2()
}

// TestLockFaultDoesNotStopJobs: a bad file at the node lock's path costs
// one warning; choosing goes on without it (the device locks alone keep
// devices apart).
func TestLockFaultDoesNotStopJobs(t *testing.T) {
	d, w := openTemp(t)
	*w = nil
	if err := syscall.Mkfifo(filepath.Join(d.Path(), ".lock"), 0o666); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		unlock, err := d.Lock(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		unlock()
	}
	if len(*w) != 1 || !strings.Contains((*w)[0], "a FIFO") || !strings.Contains((*w)[0], "without the node lock") {
		t.Errorf("warnings %q", *w)
	}
}

// Step 4: the queue.

// TestQueueUnusable: a queue that is not a directory, or that this user
// cannot write, makes Enqueue fail (Claim then waits without it).
func TestQueueUnusable(t *testing.T) {
	d, _ := openTemp(t)
	q := filepath.Join(d.Path(), "queue")
	if err := os.Symlink(t.TempDir(), q); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Enqueue(1, 8); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "a symlink owned by") {
		t.Errorf("Enqueue with a symlinked queue: %v", err)
	}
}

// Step 5: Claim puts them together.

// TestClaimWaitsWithoutQueue: with the queue unusable, a waiting Claim
// still gets its devices when they are freed.
func TestClaimWaitsWithoutQueue(t *testing.T) {
	testutil.EndToEnd(t) // real time
	d, w := openTemp(t)
	*w = nil
	os.WriteFile(filepath.Join(d.Path(), "queue"), nil, 0o644)
	other, _ := openIn(t, d.Path())
	keys := keysN(2)
	l, err := other.Acquire(keys)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(50*time.Millisecond, func() { l.Release() })
	choose := func(held map[string]State) ([]string, error) {
		if len(held) > 0 {
			return nil, ErrBusy
		}
		return keys, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := d.Claim(ctx, keys, 2, choose, 5*time.Millisecond)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	got.Release()
	if len(*w) != 1 || !strings.Contains((*w)[0], "waiting without first-come-first-served order") {
		t.Errorf("warnings %q", *w)
	}
}

// TestClaimRefusesMovedDirectory: a job whose directory was moved aside
// (lease init) while it chose does not lease in the old one.
func TestClaimRefusesMovedDirectory(t *testing.T) {
	d, _ := openTemp(t)
	if err := os.Rename(d.Path(), d.Path()+".old"); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(d.Path(), 0o755)
	_, err := d.Claim(context.Background(), keysN(1), 1, func(map[string]State) ([]string, error) { return keysN(1), nil }, 0)
	if err == nil || !strings.Contains(err.Error(), "was moved or replaced") {
		t.Errorf("Claim in a moved directory: %v", err)
	}
}

// Step 6: root prepares the directory.

func TestInit(t *testing.T) {
	testutil.RequireRoot(t)
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "run", "lock", "amdrun")
	keys := []string{"gpu0", "0000:0c:00.0"}
	rep, err := Init(path, keys)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{".lock", "gpu0.lock", "0000:0c:00.0.lock"}; !slices.Equal(rep.Made, want) || rep.Kept != 0 || !rep.Created {
		t.Errorf("report %+v, want made %q", rep, want)
	}
	check := func(name string, mode fs.FileMode) {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(path, name), &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != 0 || fs.FileMode(st.Mode&0o777) != mode.Perm() || (st.Mode&unix.S_ISVTX != 0) != (mode&fs.ModeSticky != 0) {
			t.Errorf("%s: uid %d mode %o, want root's %v", name, st.Uid, st.Mode&0o7777, mode)
		}
	}
	check(".", 0o755)
	check(".lock", 0o644)
	check("gpu0.lock", 0o644)
	check("0000:0c:00.0.lock", 0o644)
	check("queue", fs.ModeSticky|0o777)
	d, w := openIn(t, path)
	if d.Mode() != Owned || d.Owner() != 0 || d.Degraded() != "" || len(*w) != 0 {
		t.Errorf("mode %v owner %d degraded %q warnings %q", d.Mode(), d.Owner(), d.Degraded(), *w)
	}
	// Again, with one more device: kept, one made.
	rep, err = Init(path, append(keys, "gpu1"))
	if err != nil || !slices.Equal(rep.Made, []string{"gpu1.lock"}) || rep.Kept != 3 {
		t.Errorf("second Init: %+v, %v", rep, err)
	}
}

// TestInitOnlyBuilds: lease init refuses, in one line naming the path,
// its owner and mode, everything at the path it did not make, and leaves
// it exactly as it was (issue 26: it moved /etc/passwd aside and added
// lock files to a directory of unrelated files). Stand-ins only.
func TestInitOnlyBuilds(t *testing.T) {
	testutil.RequireRoot(t)
	for _, c := range []struct {
		name, want string
		make       func(path string) error
	}{
		{"root's 0644 file", "a regular file owned by root (uid 0), mode 0644", func(p string) error {
			return os.WriteFile(p, []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o644)
		}},
		{"root's empty 1777 directory", "a directory owned by root (uid 0), mode 1777, that lease init did not make: it holds neither amdrun's node lock nor a lease file", func(p string) error {
			return mkdirMode(p, 0o1777)
		}},
		{"root's 0775 directory", "a directory owned by root (uid 0), mode 0775, that lease init did not make: other users can write it", func(p string) error {
			return mkdirMode(p, 0o775)
		}},
		{"root's 0755 directory of other files", "mode 0755, that lease init did not make: it holds files lease init does not make (hosts, passwd)", func(p string) error {
			if err := mkdirMode(p, 0o755); err != nil {
				return err
			}
			os.WriteFile(filepath.Join(p, "passwd"), []byte("x"), 0o644)
			return os.WriteFile(filepath.Join(p, "hosts"), []byte("y"), 0o644)
		}},
		{"another user's directory", "(uid 65534), mode 0755, that lease init did not make;", func(p string) error {
			if err := mkdirMode(p, 0o755); err != nil {
				return err
			}
			return os.Chown(p, 65534, 65534)
		}},
		{"a symlink to root's lease directory", "a symlink owned by root (uid 0)", func(p string) error {
			real := p + ".real"
			if _, err := Init(real, []string{"gpu0"}); err != nil {
				return err
			}
			return os.Symlink(real, p)
		}},
		{"a FIFO", "a FIFO owned by root (uid 0), mode 0600", func(p string) error { return unix.Mkfifo(p, 0o600) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			path := filepath.Join(base, "amdrun")
			if err := c.make(path); err != nil {
				t.Fatal(err)
			}
			before := testutil.Tree(t, base)
			rep, err := Init(path, []string{"gpu0", "gpu1"})
			if !errors.Is(err, ErrUnsafe) || !strings.HasPrefix(err.Error(), "lease: "+path+": ") || strings.Contains(err.Error(), "\n") ||
				!strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "lease init changes nothing there: ") {
				t.Errorf("Init: %+v, %v; want one line with %q", rep, err, c.want)
			}
			if after := testutil.Tree(t, base); after != before {
				t.Errorf("Init changed what it did not make:\nbefore\n%s\nafter\n%s", before, after)
			}
		})
	}
}

// TestInitAdopts: lease init fills a directory it made before (its
// marker), one made by its tmpfiles.d lines (only its own entries) and
// an empty one of root's, and keeps what is there.
func TestInitAdopts(t *testing.T) {
	testutil.RequireRoot(t)
	base := t.TempDir()
	mine := filepath.Join(base, "mine")
	if _, err := Init(mine, []string{"gpu0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(mine, initMarker)); err != nil {
		t.Fatal(err)
	}
	tmpfiles := filepath.Join(base, "tmpfiles")
	mkdirMode(tmpfiles, 0o755)
	os.WriteFile(filepath.Join(tmpfiles, nodeLock), nil, 0o644)
	os.WriteFile(filepath.Join(tmpfiles, "gpu0.lock"), nil, 0o644)
	mkdirMode(filepath.Join(tmpfiles, queueDir), 0o1777)
	empty := filepath.Join(base, "empty")
	mkdirMode(empty, 0o755)
	for _, p := range []string{mine, tmpfiles, empty} {
		lockIno := func() uint64 {
			var st unix.Stat_t
			if unix.Stat(filepath.Join(p, "gpu0.lock"), &st) != nil {
				return 0
			}
			return st.Ino
		}
		ino := lockIno()
		rep, err := Init(p, []string{"gpu0", "gpu1"})
		if err != nil || rep.Created {
			t.Errorf("Init over %s: %+v, %v", p, rep, err)
			continue
		}
		if ino != 0 && lockIno() != ino {
			t.Errorf("%s: gpu0.lock was replaced", p)
		}
		if _, err := os.Stat(filepath.Join(p, "gpu1.lock")); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func mkdirMode(p string, mode uint32) error {
	if err := os.Mkdir(p, 0o700); err != nil {
		return err
	}
	return unix.Chmod(p, mode)
}

func TestInitRefuses(t *testing.T) {
	testutil.RequireRoot(t)
	base := t.TempDir()
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	if _, err := Init(filepath.Join(open, "amdrun"), nil); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "can change "+open) {
		t.Errorf("Init under a world-writable non-sticky directory: %v", err)
	}
	if _, err := Init(filepath.Join(base, "x"), []string{""}); !errors.Is(err, ErrBadKey) {
		t.Errorf("bad key: %v", err)
	}
}

// TestRenameExchangeRace: whatever a user who owns the parent of the
// lease directory swaps in and out (the directory and a symlink to a
// directory of root's, exchanged in a loop), root's leases go into the
// directory the path named when it was opened, never through the symlink.
func TestRenameExchangeRace(t *testing.T) {
	testutil.RequireRoot(t)
	base := t.TempDir()
	parent := filepath.Join(base, "p")
	os.Mkdir(parent, 0o755)
	victim := filepath.Join(base, "victim")
	os.Mkdir(victim, 0o755)
	os.Mkdir(filepath.Join(parent, "leases"), 0o777)
	if err := os.Symlink(victim, filepath.Join(parent, "swap")); err != nil {
		t.Fatal(err)
	}
	// The parent and what is in it belong to another user.
	for _, p := range []string{parent, filepath.Join(parent, "leases")} {
		os.Chown(p, 65534, 65534)
	}
	os.Lchown(filepath.Join(parent, "swap"), 65534, 65534)
	pfd, err := unix.Open(parent, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pfd)
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				done <- n
				return
			default:
			}
			if unix.Renameat2(pfd, "leases", pfd, "swap", unix.RENAME_EXCHANGE) == nil {
				n++
			}
		}
	}()
	const rounds = 500
	ok, refused := 0, 0
	for i := range rounds {
		d, err := Open(filepath.Join(parent, "leases"), Options{Create: true})
		if err != nil {
			if !errors.Is(err, ErrUnsafe) {
				t.Errorf("round %d: %v", i, err)
			}
			refused++
			continue
		}
		l, err := d.Acquire([]string{fmt.Sprintf("gpu%d", i%8)})
		if err == nil {
			ok++
			l.Release()
		}
		d.Close()
	}
	close(stop)
	swaps := <-done
	ents, _ := os.ReadDir(victim)
	if len(ents) != 0 {
		t.Errorf("root made %d files in the symlink's target: %v", len(ents), ents)
	}
	t.Logf("%d rounds against %d exchanges: %d leased in the real directory, %d refused (a symlink at the path)", rounds, swaps, ok, refused)
	if swaps == 0 || ok == 0 {
		t.Errorf("the race did not run: %d swaps, %d leases", swaps, ok)
	}
}

// Across processes.

// TestHolderFromKernel: Held, in another process, reports the child that
// holds a device, from the kernel: its pid, uid and command line.
func TestHolderFromKernel(t *testing.T) {
	testutil.EndToEnd(t)
	d, _ := openTemp(t)
	keys := keysN(3)
	cmd, _ := startHolder(t, "hold", d.Path(), keys[:2])
	held, err := d.Held(keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 2 {
		t.Fatalf("Held = %v, want keys %v", held, keys[:2])
	}
	for _, k := range keys[:2] {
		h := held[k].Holder
		if h.PID != cmd.Process.Pid || h.UID != os.Getuid() || !strings.HasPrefix(h.Command, os.Args[0]+" -test.run=^$") {
			t.Errorf("Held[%s] = %+v, want pid %d with the child's command line", k, h, cmd.Process.Pid)
		}
	}
}

// TestSIGKILLFreesLease: a holder killed with SIGKILL frees its devices at
// once, with no clean-up.
func TestSIGKILLFreesLease(t *testing.T) {
	testutil.EndToEnd(t)
	d, _ := openTemp(t)
	keys := keysN(3)
	cmd, _ := startHolder(t, "hold", d.Path(), keys[:2])
	if _, err := d.Acquire(keys[1:]); !errors.Is(err, ErrBusy) {
		t.Fatalf("Acquire of a held key: %v, want ErrBusy", err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	held, err := d.Held(keys)
	if err != nil || len(held) != 0 {
		t.Fatalf("after SIGKILL Held = %v, %v; want none", held, err)
	}
	l, err := d.Acquire(keys)
	if err != nil {
		t.Fatalf("Acquire after SIGKILL: %v", err)
	}
	l.Release()
}

// TestQueueFirstComeFirstServed: waiters that each need every device are
// served in the order they joined the queue.
func TestQueueFirstComeFirstServed(t *testing.T) {
	testutil.EndToEnd(t)
	d, _ := openTemp(t)
	keys := keysN(8)
	l, err := d.Acquire(keys)
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "served")
	mark := t.TempDir()
	const n = 5
	var cmds []*exec.Cmd
	for i := range n {
		cmd := child(t, "worker", d.Path(), keys, "LEASE_N=8", "LEASE_POLL_MS=5", "LEASE_HOLD_MS=10",
			"LEASE_LOG="+log, "LEASE_MARK="+mark, fmt.Sprintf("LEASE_NAME=w%d", i))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		// Wait until it has its ticket before the next one starts.
		waitFor(t, func() bool { return countTickets(d) == i+1 })
	}
	l.Release()
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
	}
	b, _ := os.ReadFile(log)
	if got, want := strings.Fields(string(b)), []string{"w0", "w1", "w2", "w3", "w4"}; !slices.Equal(got, want) {
		t.Errorf("served in order %q, want %q", got, want)
	}
}

func countTickets(d *Dir) int { return len(d.Queue(8)) }

// waitFor polls cond (a condition on the file system, not a guess at
// timing) for up to 20 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met in 20s")
}

// TestConcurrentJobs: 16 jobs at once, each wanting 2 of 8 devices, queue
// up, never share a device, run 4 at a time, and all finish.
func TestConcurrentJobs(t *testing.T) {
	testutil.EndToEnd(t)
	d, _ := openTemp(t)
	keys := keysN(8)
	mark := t.TempDir()
	const jobs = 16
	type run struct {
		cmd *exec.Cmd
		out strings.Builder
	}
	runs := make([]*run, jobs)
	for i := range runs {
		r := &run{cmd: child(t, "worker", d.Path(), keys, "LEASE_POLL_MS=10", "LEASE_HOLD_MS=1200", "LEASE_MARK="+mark)}
		r.cmd.Stdout = &r.out
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		runs[i] = r
	}
	var results []workerResult
	for i, r := range runs {
		if err := r.cmd.Wait(); err != nil {
			t.Errorf("job %d: %v", i, err)
			continue
		}
		var res workerResult
		if err := json.Unmarshal([]byte(r.out.String()), &res); err != nil {
			t.Errorf("job %d printed %q: %v", i, r.out.String(), err)
			continue
		}
		results = append(results, res)
	}
	if len(results) != jobs {
		t.Fatalf("%d of %d jobs finished", len(results), jobs)
	}
	for _, r := range results {
		if r.Violation != "" || len(r.Keys) != 2 {
			t.Errorf("pid %d: keys %q, violation %q", r.PID, r.Keys, r.Violation)
		}
	}
	// No key held by two jobs at overlapping times.
	for i, a := range results {
		for _, b := range results[i+1:] {
			if a.Start < b.End && b.Start < a.End {
				for _, k := range a.Keys {
					if slices.Contains(b.Keys, k) {
						t.Errorf("%s held by pids %d and %d at once", k, a.PID, b.PID)
					}
				}
			}
		}
	}
	// How many ran at once, at most: 4 (8 devices / 2), and it got there.
	most := 0
	for _, a := range results {
		n := 0
		for _, b := range results {
			if b.Start <= a.Start && a.Start < b.End {
				n++
			}
		}
		most = max(most, n)
	}
	if most != 4 {
		t.Errorf("at most %d jobs ran at once, want 4", most)
	}
	if held, _ := d.Held(keys); len(held) != 0 || countTickets(d) != 0 {
		t.Errorf("left behind: held %v, %d tickets", held, countTickets(d))
	}
}

// BenchmarkHeld: what a job pays to look at 8 devices, all free or all
// held by another open of the directory (held ones are looked at again
// after probeRetries milliseconds, so that another job's probe is not
// taken for a lease).
func BenchmarkHeld(b *testing.B) {
	keys := keysN(8)
	for _, held := range []bool{false, true} {
		b.Run(map[bool]string{false: "free", true: "held"}[held], func(b *testing.B) {
			d, err := Open(filepath.Join(b.TempDir(), "leases"), Options{Create: true})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			if held {
				other, _ := Open(d.Path(), Options{})
				defer other.Close()
				l, err := other.Acquire(keys)
				if err != nil {
					b.Fatal(err)
				}
				defer l.Release()
			} else {
				l, _ := d.Acquire(keys) // make the files
				l.Release()
			}
			for b.Loop() {
				if h, err := d.Held(keys); err != nil || (len(h) == 8) != held {
					b.Fatalf("Held = %v, %v", h, err)
				}
			}
		})
	}
}

// heldAll reports every device that cannot be leased in the directory now
// (as Held), by key, for every lease file name in it.
func heldAll(d *Dir) (map[string]State, error) {
	if d.fd < 0 {
		return map[string]State{}, nil
	}
	ents, err := names(d.fd, d.path)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, n := range ents {
		if k, ok := KeyFromFileName(n); ok {
			keys = append(keys, k)
		}
	}
	return d.Held(keys)
}
