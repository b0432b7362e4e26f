package lease

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// A waiter that cannot start sleeps until something happens that could
// let it start, not for a poll (issue 36.7; docs/shared-nodes.md, "A queue
// of hundreds"): inotify says when one of its own lease files is closed
// and when a ticket is closed after writing or removed (not the node lock
// nor the directories, which every job that starts opens). Without
// inotify (a user's 128 instances spent) it polls.
const (
	leaseMask = unix.IN_CLOSE_WRITE | unix.IN_CLOSE_NOWRITE
	queueMask = unix.IN_CLOSE_WRITE | unix.IN_DELETE
)

// idleLook is how long a waiter sleeps at most without an event: what no
// file event shows (a device busy with another's memory) is seen then.
const idleLook = 5 * time.Second

// wake is a waiter's inotify instance; nil polls.
type wake struct {
	f       *os.File
	queueWD int
	// again is set when the last sleep ended at a lease file's close: the
	// kernel reports the close a moment before it lets go of the file's
	// lock, so the look after it may still see the lease held; the next
	// sleep is then one poll.
	again bool
	// idle is set when the last sleep ran its idleLook out, no event
	// having come.
	idle bool
	buf  [4096]byte
}

func (w *wake) idled() bool { return w != nil && w.idle }

// watch is d's wake-up for waiters on keys; nil (poll) without inotify.
func (d *Dir) watch(keys []string) *wake {
	names, err := checkKeys(keys)
	if err != nil {
		return nil
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	w := &wake{f: os.NewFile(uintptr(fd), "inotify")}
	// The path was resolved when d was opened; inPlace (under the node
	// lock) refuses a directory moved since, so a watch on a swapped one
	// costs a waiter its wake-ups, not its safety: it still looks every
	// idleLook.
	w.queueWD, err = unix.InotifyAddWatch(fd, filepath.Join(d.path, queueDir), queueMask|unix.IN_ONLYDIR|unix.IN_DONT_FOLLOW)
	for _, n := range names {
		if err == nil {
			_, err = unix.InotifyAddWatch(fd, filepath.Join(d.path, n), leaseMask|unix.IN_DONT_FOLLOW)
			if err == unix.ENOENT {
				err = nil
			}
		}
	}
	if err != nil {
		w.f.Close()
		return nil
	}
	return w
}

// sleep waits for the next look: until the first event that matters
// (lease files' closes only with leases), not before poll/4 (events cannot
// make waiters look more often), and at the latest after poll/4 when the
// last sleep ended at a lease file's close, after poll when soon (it could
// start, or defers to a ticket that could), else after idleLook. rested:
// soon was not set. Without a watch it sleeps poll. ctx's error when ctx
// is done first.
func (w *wake) sleep(ctx context.Context, poll time.Duration, soon, leases bool) (rested bool, err error) {
	if w == nil {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(poll):
			return false, nil
		}
	}
	limit := idleLook
	switch {
	case w.again:
		limit = poll / 4
	case soon:
		limit = poll
	}
	w.again, w.idle = false, false
	start := time.Now()
	stop := context.AfterFunc(ctx, func() { w.f.SetReadDeadline(time.Now()) })
	defer stop()
	w.f.SetReadDeadline(start.Add(limit))
	for ctx.Err() == nil {
		n, err := w.f.Read(w.buf[:])
		if err != nil {
			w.idle = limit == idleLook && ctx.Err() == nil
			break // the deadline, or the watch gone: look now
		}
		if w.matters(w.buf[:n], leases) {
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(start.Add(poll / 4))):
			}
			w.drain()
			break
		}
	}
	return !soon, ctx.Err()
}

// matters reports whether events hold one that could let a waiter start:
// in the queue, or, with leases, a lease file's close.
func (w *wake) matters(events []byte, leases bool) bool {
	for len(events) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(events[0:]))
		mask := binary.NativeEndian.Uint32(events[4:])
		n := int(binary.NativeEndian.Uint32(events[12:]))
		events = events[min(unix.SizeofInotifyEvent+n, len(events)):]
		if mask&unix.IN_Q_OVERFLOW != 0 || int(wd) == w.queueWD {
			return true
		}
		if leases {
			w.again = true
			return true
		}
	}
	return false
}

// drain reads the events that came meanwhile: the next look covers them.
func (w *wake) drain() {
	w.f.SetReadDeadline(time.Now())
	for {
		if _, err := w.f.Read(w.buf[:]); err != nil {
			return
		}
	}
}

func (w *wake) close() {
	if w != nil {
		w.f.Close()
	}
}
