package lease

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/amdrun/amdrun/internal/testutil"
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
)

// The test binary re-executes itself as the other jobs of the node; the
// environment variable picks what the child does.
const childEnv = "AMDRUN_LEASE_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	os.Exit(m.Run())
}

func runChild(mode string) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "child %s: "+format+"\n", append([]any{mode}, args...)...)
		return 2
	}
	d, err := Open(os.Getenv("LEASE_DIR"), nil)
	if err != nil {
		return fail("%v", err)
	}
	keys := strings.Split(os.Getenv("LEASE_KEYS"), ",")
	switch mode {
	case "hold":
		// Lease LEASE_KEYS, say "ready", and keep the lease until stdin ends
		// (or a SIGKILL).
		l, err := d.Acquire(keys, CurrentHolder(keys))
		if err != nil {
			return fail("%v", err)
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		l.Release()
	case "ticket":
		// Take a ticket, say "ready", and keep it until stdin ends.
		tk, err := d.Enqueue()
		if err != nil {
			return fail("%v", err)
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		tk.Done()
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
	choose := func(held map[string]Holder) ([]string, error) {
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
	l, err := d.Claim(ctx, keys, CurrentHolder(nil), choose, time.Duration(poll)*time.Millisecond)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	res := workerResult{PID: os.Getpid(), Keys: l.Keys(), Start: time.Now().UnixNano()}
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
// it says "ready". Closing stdin ends it; the cleanup kills it anyway.
func startHolder(t *testing.T, mode, dir string, keys []string) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := child(t, mode, dir, keys)
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

func openTemp(t *testing.T) (*Dir, []string) {
	t.Helper()
	var warns []string
	d, err := Open(filepath.Join(t.TempDir(), "leases"), func(f string, a ...any) {
		warns = append(warns, fmt.Sprintf(f, a...))
	})
	if err != nil {
		t.Fatal(err)
	}
	return d, warns
}

func keysN(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("0000:%02x:00.0", 0x0c+i)
	}
	return keys
}

func TestOpenCreatesSharedDir(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "run", "lock", "amdrun")
	d, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
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
	// Opening again (another job) works and does not warn.
	var warned []string
	if _, err := Open(path, func(f string, a ...any) { warned = append(warned, fmt.Sprintf(f, a...)) }); err != nil || len(warned) > 0 {
		t.Errorf("second Open: %v, warnings %q", err, warned)
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
	tests := []struct {
		path, want string
	}{
		{link, link + ": unsafe path: lease directory is a symlink"},
		{file, file + ": unsafe path: lease directory is not a directory"},
		{"", "lease: empty lease directory path"},
	}
	for _, tt := range tests {
		_, err := Open(tt.path, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Open(%q) = %v, want error containing %q", tt.path, err, tt.want)
		}
	}
}

func TestOpenWarnsNotSticky(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	if err := os.Mkdir(path, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o777)
	var warned []string
	if _, err := Open(path, func(f string, a ...any) { warned = append(warned, fmt.Sprintf(f, a...)) }); err != nil {
		t.Fatal(err)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "world-writable but not sticky") {
		t.Errorf("warnings = %q, want one about the sticky bit", warned)
	}
}

func TestOpenDefaultFallsBack(t *testing.T) {
	base := t.TempDir()
	notDir := filepath.Join(base, "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	xdg := filepath.Join(base, "xdg")
	os.Mkdir(xdg, 0o700)
	t.Setenv("XDG_RUNTIME_DIR", xdg)
	var warned []string
	d, err := OpenDefault(notDir, func(f string, a ...any) { warned = append(warned, fmt.Sprintf(f, a...)) })
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(xdg, "amdrun"); d.Path() != want {
		t.Errorf("Path() = %q, want %q", d.Path(), want)
	}
	if fi, err := os.Stat(d.Path()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("fallback dir: %v, %v; want mode 0700", fi.Mode(), err)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "using "+d.Path()) || !strings.Contains(warned[0], "not a directory") {
		t.Errorf("warnings = %q", warned)
	}
	if _, err := d.Acquire([]string{"gpu0"}, CurrentHolder(nil)); err != nil {
		t.Errorf("Acquire in fallback dir: %v", err)
	}
}

// TestHolderRoundTrip: Held, in another process, reports who holds a
// device and what they leased with it.
func TestHolderRoundTrip(t *testing.T) {
	testutil.EndToEnd(t)
	d, _ := openTemp(t)
	keys := keysN(3)
	before := time.Now()
	cmd, _ := startHolder(t, "hold", d.Path(), keys[:2])
	held, err := d.Held(keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 2 {
		t.Fatalf("Held = %v, want keys %v", held, keys[:2])
	}
	hn, _ := os.Hostname()
	for _, k := range keys[:2] {
		h := held[k]
		if h.PID != cmd.Process.Pid || h.UID != os.Geteuid() || h.User != userName(os.Geteuid()) || h.Host != hn {
			t.Errorf("Held[%s] = %+v, want pid %d uid %d host %s", k, h, cmd.Process.Pid, os.Geteuid(), hn)
		}
		if !slices.Equal(h.Devices, keys[:2]) {
			t.Errorf("Held[%s].Devices = %q, want %q", k, h.Devices, keys[:2])
		}
		if !strings.HasPrefix(h.Command, os.Args[0]+" -test.run=^$") {
			t.Errorf("Held[%s].Command = %q, want the child's command line", k, h.Command)
		}
		if h.Start.Before(before.Add(-time.Second)) || h.Start.After(time.Now()) {
			t.Errorf("Held[%s].Start = %v, not within the test", k, h.Start)
		}
	}
	// The file itself is JSON for people.
	b, err := os.ReadFile(filepath.Join(d.Path(), "0000:0c:00.0.lock"))
	if err != nil || !strings.Contains(string(b), fmt.Sprintf(`"pid": %d`, cmd.Process.Pid)) {
		t.Errorf("lease file = %q, %v", b, err)
	}
	// List finds the same, and only the held ones.
	all, err := d.List()
	if err != nil || len(all) != 2 || all[keys[0]].PID != cmd.Process.Pid {
		t.Errorf("List() = %v, %v", all, err)
	}
}

// TestSIGKILLFreesLease: a holder killed with SIGKILL frees its devices at
// once, with no clean-up, though its file and its content stay behind.
func TestSIGKILLFreesLease(t *testing.T) {
	testutil.EndToEnd(t)
	d, _ := openTemp(t)
	keys := keysN(3)
	cmd, _ := startHolder(t, "hold", d.Path(), keys[:2])

	// Busy while it lives: all or nothing, and the error names the holder.
	_, err := d.Acquire(keys[1:], CurrentHolder(nil))
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("Acquire of a held key: %v, want ErrBusy", err)
	}
	want := fmt.Sprintf("lease: %s: device is leased by another process: held by pid %d (", keys[1], cmd.Process.Pid)
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error = %q, want prefix %q", err, want)
	}
	if held, _ := d.Held(keys[2:]); len(held) != 0 {
		t.Errorf("a failed Acquire left %v held", held)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	held, err := d.Held(keys)
	if err != nil || len(held) != 0 {
		t.Fatalf("after SIGKILL Held = %v, %v; want none", held, err)
	}
	if b, _ := os.ReadFile(filepath.Join(d.Path(), "0000:0c:00.0.lock")); !strings.Contains(string(b), `"pid"`) {
		t.Errorf("stale content %q should be there (and ignored)", b)
	}
	l, err := d.Acquire(keys, CurrentHolder(nil))
	if err != nil {
		t.Fatalf("Acquire after SIGKILL: %v", err)
	}
	held, _ = d.Held(keys)
	if len(held) != 3 || held[keys[0]].PID != os.Getpid() {
		t.Errorf("Held = %v, want all 3 by us", held)
	}
	l.Release()
	l.Release() // twice is fine
	if held, _ := d.Held(keys); len(held) != 0 {
		t.Errorf("after Release Held = %v", held)
	}
	if b, _ := os.ReadFile(filepath.Join(d.Path(), "0000:0c:00.0.lock")); len(b) != 0 {
		t.Errorf("Release left holder info %q", b)
	}
}

// TestSymlinkRefused: a symlink planted at a lease path is never followed:
// a clear error names the path and the target keeps its content and mtime.
func TestSymlinkRefused(t *testing.T) {
	d, _ := openTemp(t)
	outside := t.TempDir()
	target := filepath.Join(outside, "precious")
	if err := os.WriteFile(target, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := os.Chtimes(target, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	absent := filepath.Join(outside, "absent")
	planted := map[string]string{"gpu0.lock": target, "gpu1.lock": absent, ".lock": target}
	for name, to := range planted {
		if err := os.Symlink(to, filepath.Join(d.Path(), name)); err != nil {
			t.Fatal(err)
		}
	}

	for _, keys := range [][]string{{"gpu2", "gpu0"}, {"gpu1"}} {
		_, err := d.Acquire(keys, CurrentHolder(nil))
		path := filepath.Join(d.Path(), keys[len(keys)-1]+".lock")
		want := "lease: " + path + ": unsafe path: is a symlink"
		if !errors.Is(err, ErrUnsafe) || err.Error() != want {
			t.Errorf("Acquire(%q) = %v, want %q", keys, err, want)
		}
	}
	if held, _ := d.Held([]string{"gpu2"}); len(held) != 0 {
		t.Errorf("gpu2 left held after a failed Acquire: %v", held)
	}
	if _, err := d.Held([]string{"gpu0"}); !errors.Is(err, ErrUnsafe) {
		t.Errorf("Held on a symlink: %v, want ErrUnsafe", err)
	}
	if _, err := d.Lock(context.Background()); !errors.Is(err, ErrUnsafe) {
		t.Errorf("Lock with a symlinked .lock: %v, want ErrUnsafe", err)
	}

	fi, err := os.Stat(target)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "precious\n" || !fi.ModTime().Equal(mtime) {
		t.Errorf("target changed: %q, mtime %v", b, fi.ModTime())
	}
	if _, err := os.Lstat(absent); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("dangling symlink target was created: %v", err)
	}
}

// TestFIFORefused: a FIFO at a lease path neither blocks nor is used.
func TestFIFORefused(t *testing.T) {
	d, _ := openTemp(t)
	if err := syscall.Mkfifo(filepath.Join(d.Path(), "gpu0.lock"), 0o666); err != nil {
		t.Fatal(err)
	}
	_, err := d.Acquire([]string{"gpu0"}, CurrentHolder(nil))
	if !errors.Is(err, ErrUnsafe) || !strings.HasSuffix(err.Error(), "gpu0.lock: unsafe path: not a regular file") {
		t.Errorf("Acquire on a FIFO: %v", err)
	}
}

// TestHardLinkNotWritten: a hard link to a file elsewhere, planted at a
// lease path, is locked but never written.
func TestHardLinkNotWritten(t *testing.T) {
	d, _ := openTemp(t)
	var warned []string
	d.warn = func(f string, a ...any) { warned = append(warned, fmt.Sprintf(f, a...)) }
	target := filepath.Join(t.TempDir(), "mine")
	os.WriteFile(target, []byte("keep me\n"), 0o644)
	if err := os.Link(target, filepath.Join(d.Path(), "gpu0.lock")); err != nil {
		t.Skip("cannot hard-link:", err)
	}
	l, err := d.Acquire([]string{"gpu0"}, CurrentHolder(nil))
	if err != nil {
		t.Fatal(err)
	}
	held, _ := d.Held([]string{"gpu0"})
	if held["gpu0"].PID != os.Getpid() {
		t.Errorf("Held = %v, want us (from the kernel's lock table)", held)
	}
	l.Release()
	if b, _ := os.ReadFile(target); string(b) != "keep me\n" {
		t.Errorf("target changed to %q", b)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "has 2 links") {
		t.Errorf("warnings = %q", warned)
	}
}

// TestOtherUsersStaleFile: another user's lease file, left by a dead job,
// is leased without writing to it.
func TestOtherUsersStaleFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a file of another user")
	}
	d, _ := openTemp(t)
	path := filepath.Join(d.Path(), "gpu0.lock")
	os.WriteFile(path, []byte("stale junk\n"), 0o644)
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	l, err := d.Acquire([]string{"gpu0"}, CurrentHolder(nil))
	if err != nil {
		t.Fatal(err)
	}
	held, _ := d.Held([]string{"gpu0"})
	if h := held["gpu0"]; h.PID != os.Getpid() || h.UID != os.Geteuid() || !slices.Equal(h.Devices, []string{"gpu0"}) {
		t.Errorf("Held = %+v, want us, from the kernel's lock table and /proc", h)
	}
	l.Release()
	if b, _ := os.ReadFile(path); string(b) != "stale junk\n" {
		t.Errorf("another user's file was written: %q", b)
	}
}

func TestAcquireBadKeys(t *testing.T) {
	d, _ := openTemp(t)
	for _, keys := range [][]string{nil, {"gpu0", "gpu0"}, {""}} {
		if _, err := d.Acquire(keys, Holder{}); !errors.Is(err, ErrBadKey) {
			t.Errorf("Acquire(%q) = %v, want ErrBadKey", keys, err)
		}
	}
	if held, _ := d.Held([]string{"gpu0"}); len(held) != 0 {
		t.Errorf("Held = %v after refused Acquire", held)
	}
}

func TestLockWaitsForContext(t *testing.T) {
	d, _ := openTemp(t)
	unlock, err := d.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := d.Lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("second Lock = %v, want DeadlineExceeded", err)
	}
	unlock()
	unlock()
	unlock2, err := d.Lock(context.Background())
	if err != nil {
		t.Fatalf("Lock after unlock: %v", err)
	}
	unlock2()
}

func TestQueueInProcess(t *testing.T) {
	d, _ := openTemp(t)
	var tk [3]*Ticket
	for i := range tk {
		var err error
		if tk[i], err = d.Enqueue(); err != nil {
			t.Fatal(err)
		}
	}
	first := func() [3]bool {
		var f [3]bool
		for i, x := range tk {
			f[i], _ = x.First()
		}
		return f
	}
	if got := first(); got != [3]bool{true, false, false} {
		t.Fatalf("First() = %v, want only the oldest", got)
	}
	tk[0].Done()
	tk[0].Done()
	if _, err := tk[0].First(); err == nil {
		t.Error("First after Done: no error")
	}
	if f, _ := tk[1].First(); !f {
		t.Error("second ticket not first after the oldest is done")
	}
	if f, _ := tk[2].First(); f {
		t.Error("third ticket first while the second waits")
	}
	tk[1].Done()
	if f, _ := tk[2].First(); !f {
		t.Error("third ticket not first at the end")
	}
	tk[2].Done()
	ents, _ := os.ReadDir(filepath.Join(d.Path(), "queue"))
	if len(ents) != 0 {
		t.Errorf("queue left %d files", len(ents))
	}
}

// TestQueueDeadWaiterIgnored: a waiter that dies keeps nobody waiting, and
// its ticket is tidied away.
func TestQueueDeadWaiterIgnored(t *testing.T) {
	testutil.EndToEnd(t)
	d, _ := openTemp(t)
	cmd, _ := startHolder(t, "ticket", d.Path(), nil)
	mine, err := d.Enqueue()
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Done()
	if f, _ := mine.First(); f {
		t.Fatal("first while an older live waiter exists")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if f, err := mine.First(); !f || err != nil {
		t.Fatalf("First() = %v, %v after the older waiter died", f, err)
	}
	ents, _ := os.ReadDir(filepath.Join(d.Path(), "queue"))
	if len(ents) != 1 || ents[0].Name() != mine.Name() {
		t.Errorf("queue holds %v, want only %s", ents, mine.Name())
	}
}

// TestQueueFirstComeFirstServed: waiters that each need every device are
// served in the order they joined the queue.
func TestQueueFirstComeFirstServed(t *testing.T) {
	testutil.EndToEnd(t)
	d, _ := openTemp(t)
	keys := keysN(8)
	l, err := d.Acquire(keys, CurrentHolder(nil))
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

func countTickets(d *Dir) int {
	ents, _ := os.ReadDir(filepath.Join(d.Path(), "queue"))
	n := 0
	for _, e := range ents {
		if ticketName(e.Name()) {
			n++
		}
	}
	return n
}

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
	if testing.Short() {
		t.Skip("takes a few seconds")
	}
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
