package reserve

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/lease"
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

// The lease protocol, step by step, in one process: flock locks belong to
// the open file, so a second lease.Dir in the test excludes Reserve as
// another job would.

// seedNode is the bundled example: the seed MI250 node (best pair 0,1).
func seedNode(t *testing.T) *topology.Model {
	t.Helper()
	m, err := discover.Example()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func leaseDir(t *testing.T) *lease.Dir {
	t.Helper()
	d, err := lease.Open(filepath.Join(t.TempDir(), "leases"), lease.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func init() { waitPoll = 10 * time.Millisecond }

// shorten sets one of the package's waits for the test.
func shorten(t *testing.T, v *time.Duration, d time.Duration) {
	old := *v
	*v = d
	t.Cleanup(func() { *v = old })
}

func reservation(m *topology.Model, d *lease.Dir, n int) Options {
	return Options{Model: m, Request: selector.Request{N: n}, Policy: selector.Tree, Leases: d}
}

// holdOther leases keys through a second open of the directory, as another job.
func holdOther(t *testing.T, d *lease.Dir, m *topology.Model, devs ...int) *lease.Lease {
	t.Helper()
	other, err := lease.Open(d.Path(), lease.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	keys := m.Keys()
	var ks []string
	for _, i := range devs {
		ks = append(ks, keys[i])
	}
	l, err := other.Acquire(ks)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestReserveWithoutLeasesSelectsOnly(t *testing.T) {
	m := seedNode(t)
	c, l, err := Devices(context.Background(), Options{Model: m, Request: selector.Request{N: 2}, Policy: selector.Tree})
	if err != nil || l != nil {
		t.Fatalf("lease %v, err %v", l, err)
	}
	if topology.JoinInts(c.Devices) != "0,1" {
		t.Errorf("chose %v, want 0,1", c.Devices)
	}
}

func TestReserveLeasesTheChoice(t *testing.T) {
	m, d := seedNode(t), leaseDir(t)
	c, l, err := Devices(context.Background(), reservation(m, d, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	keys := m.Keys()
	held, err := d.Held(keys)
	if err != nil || len(held) != 2 {
		t.Fatalf("held %v, err %v: want the 2 chosen devices leased", held, err)
	}
	for _, dev := range c.Devices {
		if _, ok := held[keys[dev]]; !ok {
			t.Errorf("device %d was chosen but %s is not leased (held %v)", dev, keys[dev], held)
		}
	}
	// A second job gets the next best pair, never these.
	c2, l2, err := Devices(context.Background(), reservation(m, d, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release()
	for _, a := range c.Devices {
		for _, b := range c2.Devices {
			if a == b {
				t.Fatalf("second job got device %d of the first (%v, %v)", a, c.Devices, c2.Devices)
			}
		}
	}
}

func TestReserveDryRunTakesNoLease(t *testing.T) {
	m, d := seedNode(t), leaseDir(t)
	other := holdOther(t, d, m, 0)
	defer other.Release()
	r := reservation(m, d, 2)
	r.DryRun = true
	c, l, err := Devices(context.Background(), r)
	if err != nil || l != nil {
		t.Fatalf("lease %v, err %v", l, err)
	}
	for _, dev := range c.Devices {
		if dev == 0 {
			t.Errorf("dry run chose leased device 0: %v", c.Devices)
		}
	}
	if held, _ := d.Held(m.Keys()); len(held) != 1 {
		t.Errorf("dry run changed the leases: %v", held)
	}
}

func TestReserveBusyFailsAtOnceNamingTheHolder(t *testing.T) {
	m, d := seedNode(t), leaseDir(t)
	other := holdOther(t, d, m, 0, 1, 2, 3, 4, 5, 6)
	defer other.Release()
	queued := false
	r := reservation(m, d, 2)
	r.Queued = func(int, error, []lease.Waiting) { queued = true }
	start := time.Now()
	_, l, err := Devices(context.Background(), r)
	var ne *selector.NotEnoughError
	if !errors.As(err, &ne) || l != nil {
		t.Fatalf("err %v, lease %v: want *selector.NotEnoughError", err, l)
	}
	// The holder is this test process, as the kernel says.
	if len(ne.Held) != 7 || !strings.HasPrefix(ne.Held[0], fmt.Sprintf("leased by pid %d (", os.Getpid())) {
		t.Errorf("held %v", ne.Held)
	}
	// Not queuing is what Queued says; the time only catches a wait that
	// bypasses it (a waiting reservation waits for devices this test frees
	// only at its end), far above what a loaded machine adds.
	if queued || time.Since(start) > 20*time.Second {
		t.Errorf("without Wait it queued (%v) or took %v", queued, time.Since(start))
	}
}

func TestReserveWaitsUntilFreed(t *testing.T) {
	testutil.EndToEnd(t) // real time
	m, d := seedNode(t), leaseDir(t)
	other := holdOther(t, d, m, 0, 1, 2, 3, 4, 5, 6)
	var queued atomic.Int32
	r := reservation(m, d, 2)
	r.Wait = 10 * time.Second
	r.Queued = func(want int, why error, _ []lease.Waiting) {
		queued.Add(1)
		if want != 2 || !strings.Contains(why.Error(), "held: 0-6 (leased by") {
			t.Errorf("queued for %d: %v", want, why)
		}
	}
	time.AfterFunc(100*time.Millisecond, func() { other.Release() })
	c, l, err := Devices(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if queued.Load() != 1 || len(c.Devices) != 2 {
		t.Errorf("queued %d times, chose %v", queued.Load(), c.Devices)
	}
}

func TestReserveWaitGivesUp(t *testing.T) {
	testutil.EndToEnd(t) // real time
	m, d := seedNode(t), leaseDir(t)
	other := holdOther(t, d, m, 0, 1, 2, 3, 4, 5, 6, 7)
	defer other.Release()
	r := reservation(m, d, 1)
	r.Wait = 150 * time.Millisecond
	start := time.Now()
	_, _, err := Devices(context.Background(), r)
	if err == nil || err.Error() != "gave up waiting for devices after 150ms" {
		t.Fatalf("err %v", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("gave up after %v", el)
	}
}

func TestReserveImpossibleRequestDoesNotWait(t *testing.T) {
	m, d := seedNode(t), leaseDir(t)
	r := reservation(m, d, 9) // the node has 8: waiting cannot help
	r.Wait = time.Hour
	r.Queued = func(int, error, []lease.Waiting) { t.Error("queued for a request no release can satisfy") }
	_, _, err := Devices(context.Background(), r)
	var ne *selector.NotEnoughError
	if !errors.As(err, &ne) {
		t.Fatalf("err %v", err)
	}
}

func TestDescribeHolderIsOneShortLine(t *testing.T) {
	h := lease.Holder{PID: 7, User: "bob", Start: time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local),
		Command: "python -c 'import x\nprint(1)'" + strings.Repeat(" --flag", 20)}
	s := DescribeHolder(lease.State{Holder: h})
	if strings.Contains(s, "\n") || len([]rune(s)) > 120 || !strings.HasPrefix(s, "leased by pid 7 (bob: python -c 'import x print(1)'") ||
		!strings.HasSuffix(s, "...), started 03:04:05") {
		t.Errorf("%q", s)
	}
	// Nothing is made up for what is unknown: no "since 00:00:00".
	if s := DescribeHolder(lease.State{Holder: lease.Holder{PID: 9, UID: -1}}); s != "leased by pid 9" {
		t.Errorf("unknown holder: %q", s)
	}
	if s := DescribeHolder(lease.State{Fault: lease.ErrUnsafe}); s != "unusable lease file" {
		t.Errorf("fault: %q", s)
	}
}

// TestReserveNodeLockDeadline: a node lock another process keeps held
// makes a job without --wait fail after nodeLockWait, and one with --wait
// give up at its deadline; both name the holder.
func TestReserveNodeLockDeadline(t *testing.T) {
	testutil.EndToEnd(t) // real time
	m, d := seedNode(t), leaseDir(t)
	other, err := lease.Open(d.Path(), lease.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	unlock, err := other.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	holder := fmt.Sprintf("stayed held by pid %d (", os.Getpid())

	r := reservation(m, d, 1)
	shorten(t, &nodeLockWait, 100*time.Millisecond)
	start := time.Now()
	_, l, err := Devices(context.Background(), r)
	el := time.Since(start)
	if !errors.Is(err, lease.ErrLocked) || l != nil || !strings.Contains(err.Error(), holder) || !strings.Contains(err.Error(), "--wait=DURATION") {
		t.Fatalf("err %v, want the node lock and its holder named", err)
	}
	if el < 100*time.Millisecond || el > 2*time.Second {
		t.Errorf("failed after %v, want about 100ms", el)
	}

	r = reservation(m, d, 1)
	r.Wait = 150 * time.Millisecond
	start = time.Now()
	_, _, err = Devices(context.Background(), r)
	el = time.Since(start)
	if err == nil || !strings.HasPrefix(err.Error(), "gave up waiting for devices after 150ms: lease: the node lock ") || !strings.Contains(err.Error(), holder) {
		t.Fatalf("err %v", err)
	}
	if el > 2*time.Second {
		t.Errorf("--wait=150ms gave up after %v", el)
	}
}

// TestReserveSkipsUnusableLeaseFile: a FIFO at one device's lease path
// leaves that device out; the others are chosen as usual.
func TestReserveSkipsUnusableLeaseFile(t *testing.T) {
	m, d := seedNode(t), leaseDir(t)
	keys := m.Keys()
	name, _ := lease.FileName(keys[0])
	if err := syscall.Mkfifo(filepath.Join(d.Path(), name), 0o666); err != nil {
		t.Fatal(err)
	}
	c, l, err := Devices(context.Background(), reservation(m, d, 7))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if c.Devices[0] == 0 || len(c.Devices) != 7 {
		t.Errorf("chose %v with device 0's lease file a FIFO", c.Devices)
	}
	_, _, err = Devices(context.Background(), reservation(m, d, 1))
	var ne *selector.NotEnoughError
	if !errors.As(err, &ne) || ne.Held[0] != "unusable lease file" {
		t.Errorf("err %v: want device 0 listed as unusable", err)
	}
}

// TestReserveRefreshesBusyWhenALeaseFrees is the queued job behind a job
// that held every device and had memory on six of them: when its leases
// go (its last process is gone, and its memory with it) the busy state
// seen at start is stale. With Refresh the queued job sees the devices
// idle again and takes the best four; without, it could only fail.
func TestReserveRefreshesBusyWhenALeaseFrees(t *testing.T) {
	testutil.EndToEnd(t) // real time: a lease released on a timer, Settle
	for _, refresh := range []bool{true, false} {
		t.Run(fmt.Sprintf("refresh=%v", refresh), func(t *testing.T) {
			m, d := seedNode(t), leaseDir(t)
			for i := 0; i < 6; i++ {
				m.Devices[i].Busy, m.Devices[i].BusyReason = true, "1 process(es)"
			}
			other := holdOther(t, d, m, 0, 1, 2, 3, 4, 5, 6, 7)
			r := reservation(m, d, 4)
			r.Wait = 10 * time.Second
			var calls atomic.Int32
			if refresh {
				r.Refresh = func(context.Context) (*topology.Model, error) {
					calls.Add(1)
					return seedNode(t), nil // every device idle now
				}
			}
			time.AfterFunc(100*time.Millisecond, func() { other.Release() })
			c, l, err := Devices(context.Background(), r)
			if !refresh {
				var ne *selector.NotEnoughError
				if !errors.As(err, &ne) || len(ne.Busy) != 6 {
					t.Fatalf("without Refresh: err %v, want not enough with 6 busy", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release()
			if topology.JoinInts(c.Devices) != "0,1,6,7" || calls.Load() != 1 {
				t.Errorf("chose %v after %d refreshes, want 0,1,6,7 after one", c.Devices, calls.Load())
			}
		})
	}
}

// TestReserveWaitsForReleasedMemory: the leaving job's lease goes when its
// last process does, but the driver shows its memory (and process) for a
// moment longer. The queued job keeps waiting for those devices, looking
// again, instead of failing on a busy state a few ms old; a device that
// stays busy past Settle is busy.
func TestReserveWaitsForReleasedMemory(t *testing.T) {
	testutil.EndToEnd(t) // real time: a lease released on a timer, Settle
	for _, tc := range []struct {
		name      string
		busyLooks int32 // discoveries that still show 0-5 busy
		want      string
	}{
		{"memory freed after two looks", 2, "0,1,6,7"},
		{"memory never freed", 1 << 30, "not enough"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			busy := func(m *topology.Model) *topology.Model {
				for i := 0; i < 6; i++ {
					m.Devices[i].Busy, m.Devices[i].BusyReason = true, "1 process(es)"
				}
				return m
			}
			m, d := busy(seedNode(t)), leaseDir(t)
			other := holdOther(t, d, m, 0, 1, 2, 3, 4, 5, 6, 7)
			r := reservation(m, d, 4)
			r.Wait = 20 * time.Second
			shorten(t, &settleTime, 1500*time.Millisecond)
			var looks atomic.Int32
			r.Refresh = func(context.Context) (*topology.Model, error) {
				if looks.Add(1) <= tc.busyLooks {
					return busy(seedNode(t)), nil
				}
				return seedNode(t), nil
			}
			time.AfterFunc(50*time.Millisecond, func() { other.Release() })
			start := time.Now()
			c, l, err := Devices(context.Background(), r)
			if tc.want == "not enough" {
				var ne *selector.NotEnoughError
				if !errors.As(err, &ne) || time.Since(start) < 1500*time.Millisecond {
					t.Fatalf("err %v after %v: want not enough, after Settle", err, time.Since(start))
				}
				return
			}
			if err != nil {
				t.Fatalf("%v (after %d looks)", err, looks.Load())
			}
			defer l.Release()
			if topology.JoinInts(c.Devices) != tc.want || looks.Load() != 3 {
				t.Errorf("chose %v after %d looks, want %s after 3", c.Devices, looks.Load(), tc.want)
			}
		})
	}
}
