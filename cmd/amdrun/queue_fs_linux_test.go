package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/testutil"
)

// TestQueueOnBtrfsAndOverlay: a lease directory on a btrfs subvolume, and
// on an overlay whose layers are on two file systems: there stat gives a
// device other than the one /proc/locks prints for the same file (issue
// 36.5: ps showed an empty queue with two waiters and named the holder "a
// process this node does not show"). ps names the job holding the
// devices and lists both waiters in their order, and both start once it
// ends.
func TestQueueOnBtrfsAndOverlay(t *testing.T) {
	s := newShared(t)
	u := testutil.NewUserPrefixed(t, "locks-")
	for _, kind := range []string{"btrfs-subvolume", "overlay"} {
		t.Run(kind, func(t *testing.T) {
			dir := filepath.Join(mountKind(t, kind), "amdrun")
			s.rootPrepared(dir)
			env := s.envFor(dir)
			holder, holderErr := s.start(nil, env, "--ngpus", "8", "--no-python", "/bin/sleep", "600")
			s.waitLeased(dir, 8, holder, holderErr)
			var waiters []int
			var errs []*syncBuf
			done := make(chan *exec.Cmd, 2)
			for _, n := range []string{"8", "2"} {
				w, werr := s.start(&u, env, "--wait=2m", "--ngpus", n, "--no-python", "/bin/true")
				go func() { w.Wait(); done <- w }()
				waiters, errs = append(waiters, w.Process.Pid), append(errs, werr)
				// Their tickets' times are a second apart.
				time.Sleep(1100 * time.Millisecond)
			}
			holders, queue := psHoldersQueue(s, dir, len(waiters))
			if len(holders) != 1 || holders[0] != holder.Process.Pid {
				t.Errorf("ps names the holders %v, want pid %d on every device", holders, holder.Process.Pid)
			}
			if !slices.Equal(queue, waiters) {
				t.Errorf("ps lists the queue %v, want the waiters %v in that order\nfirst waiter: %s\nsecond waiter: %s", queue, waiters, errs[0], errs[1])
			}
			holder.Process.Signal(syscall.SIGTERM)
			for range waiters {
				select {
				case w := <-done:
					if code := w.ProcessState.ExitCode(); code != 0 {
						t.Errorf("waiter pid %d: exit %d\n%s", w.Process.Pid, code, errs[slices.Index(waiters, w.Process.Pid)])
					}
				case <-time.After(60 * time.Second):
					t.Fatalf("the waiters did not end within 60 s of the holder\n%s\n%s", errs[0], errs[1])
				}
			}
		})
	}
}

// psHoldersQueue is what ps --json shows, once it lists want waiters (20
// s at most): the pids holding devices, and the queue's pids in order.
func psHoldersQueue(s *shared, dir string, want int) (holders, queue []int) {
	s.t.Helper()
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r, _ := s.run(nil, s.envFor(dir), 20*time.Second, "ps", "--json")
		var ps struct {
			Devices []struct {
				Holder *struct {
					PID int `json:"pid"`
				} `json:"holder"`
			} `json:"devices"`
			Queue []struct {
				PID int `json:"pid"`
			} `json:"queue"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &ps); err != nil {
			s.t.Fatalf("ps --json: %v\n%s%s", err, r.stdout, r.stderr)
		}
		holders, queue = nil, nil
		for _, d := range ps.Devices {
			if d.Holder != nil && !slices.Contains(holders, d.Holder.PID) {
				holders = append(holders, d.Holder.PID)
			}
		}
		for _, w := range ps.Queue {
			queue = append(queue, w.PID)
		}
		if len(queue) >= want || time.Now().After(end) {
			return holders, queue
		}
	}
}

// mountKind mounts a file system of kind for the test, unmounted when it
// ends (whatever its outcome), and returns a directory in it that every
// user can pass through: "btrfs-subvolume", a subvolume of a btrfs made on
// a loop file; "overlay", an overlay with its lower layer on a tmpfs and
// its upper one on the test's disk. It skips the test where this host
// cannot mount them.
func mountKind(t *testing.T, kind string) string {
	t.Helper()
	base := testutil.SharedDir(t, 0o755)
	mnt := filepath.Join(base, "mnt")
	for _, d := range []string{"mnt", "low", "up", "work"} {
		if err := os.Mkdir(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	switch kind {
	case "btrfs-subvolume":
		if _, err := exec.LookPath("mkfs.btrfs"); err != nil {
			if os.Getenv(testutil.RequireRootEnv) == "1" {
				t.Fatalf("mkfs.btrfs: %v (CI installs btrfs-progs)", err)
			}
			t.Skipf("mkfs.btrfs: %v (btrfs-progs is not installed)", err)
		}
		img := filepath.Join(base, "btrfs.img")
		if err := os.WriteFile(img, nil, 0o600); err != nil || os.Truncate(img, 200<<20) != nil {
			t.Fatalf("%s: %v", img, err)
		}
		if out, err := exec.Command("mkfs.btrfs", "-q", img).CombinedOutput(); err != nil {
			t.Fatalf("mkfs.btrfs: %v\n%s", err, out)
		}
		mountAt(t, mnt, "-o", "loop", img)
		sub := filepath.Join(mnt, "sub")
		if out, err := exec.Command("btrfs", "subvolume", "create", sub).CombinedOutput(); err != nil {
			t.Fatalf("btrfs subvolume create: %v\n%s", err, out)
		}
		return sub
	case "overlay":
		low := filepath.Join(base, "low")
		mountAt(t, low, "-t", "tmpfs", "-o", "mode=0755", "tmpfs")
		mountAt(t, mnt, "-t", "overlay", "-o", "lowerdir="+low+",upperdir="+filepath.Join(base, "up")+",workdir="+filepath.Join(base, "work"), "overlay")
		return mnt
	}
	t.Fatalf("no file system %q", kind)
	return ""
}

// mountAt mounts what args say at target, and unmounts it when the test
// ends (a loop device mount(8) set up goes with it: autoclear).
func mountAt(t *testing.T, target string, args ...string) {
	t.Helper()
	if out, err := exec.Command("mount", append(args, target)...).CombinedOutput(); err != nil {
		t.Skipf("this host cannot mount %v at %s: %v: %s", args, target, err, out)
	}
	t.Cleanup(func() {
		var out []byte
		var err error
		for try := 0; try < 50; try++ {
			if out, err = exec.Command("umount", target).CombinedOutput(); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		exec.Command("umount", "--lazy", target).Run()
		t.Errorf("umount %s: %v: %s (detached lazily)", target, err, out)
	})
}

// TestWaitPastAnInodeTwinOnBtrfs: /proc/locks cannot tell a lease file
// from a file with its inode number in another subvolume of the same
// btrfs, so a lock on that one makes a waiter's look count the device
// held. A --wait job whose turn it is tries anyway once nothing has woken
// it for 5 s (before, it waited out its 30 s on a free node).
func TestWaitPastAnInodeTwinOnBtrfs(t *testing.T) {
	s := newShared(t)
	sub := mountKind(t, "btrfs-subvolume")
	dir := filepath.Join(sub, "amdrun")
	s.rootPrepared(dir)
	other := filepath.Join(filepath.Dir(sub), "other")
	if out, err := exec.Command("btrfs", "subvolume", "create", other).CombinedOutput(); err != nil {
		t.Fatalf("btrfs subvolume create: %v\n%s", err, out)
	}
	var lease syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, "gpu0.lock"), &lease); err != nil {
		t.Fatal(err)
	}
	var twin string
	for i := 0; twin == "" && i < 10000; i++ {
		f := filepath.Join(other, fmt.Sprintf("f%d", i))
		var st syscall.Stat_t
		if err := os.WriteFile(f, nil, 0o644); err != nil || syscall.Stat(f, &st) != nil {
			t.Fatal(err)
		}
		if st.Ino == lease.Ino {
			twin = f
		} else if st.Ino > lease.Ino {
			t.Skipf("inode numbers in the new subvolume passed %d (at %d) without it", lease.Ino, st.Ino)
		}
	}
	f, err := os.Open(twin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	// Root's job holds the devices for 2 s: the --wait job queues, and
	// then waits with all 8 free.
	holder, holderErr := s.start(nil, s.envFor(dir), "--ngpus", "8", "--no-python", "/bin/sleep", "2")
	s.waitLeased(dir, 8, holder, holderErr)
	r, took := s.run(nil, s.envFor(dir), 40*time.Second, "--wait=30s", "--ngpus", "8", "--no-python", "/bin/true")
	if r.code != 0 {
		t.Fatalf("--wait job with an inode twin of gpu0.lock locked: exit %d after %v\n%s", r.code, took, r.stderr)
	}
	t.Logf("started and ended after %v", took.Round(time.Millisecond))
}
