package lease

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// A waiter that cannot start sleeps until inotify says one of its lease
// files or a ticket went (issue 36.7; docs/shared-nodes.md, "A queue of
// hundreds"); without inotify it polls.
const (
	leaseMask = unix.IN_CLOSE_WRITE | unix.IN_CLOSE_NOWRITE
	queueMask = unix.IN_CLOSE_WRITE | unix.IN_DELETE
)

// idleLook is the longest sleep without an event, for what no file
// event shows (a device busy with another's memory).
const idleLook = 5 * time.Second

// wake is a waiter's inotify instance; nil polls.
type wake struct {
	f       *os.File
	queueWD int
	// again: the last sleep ended at a lease file's close, which the
	// kernel reports before it lets go of the lock; the next is short.
	again bool
	idle  bool // the last sleep ran its idleLook out
	buf   [4096]byte
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
	// A watch on a directory swapped since Open costs wake-ups, not
	// safety: claimOnce refuses it, and waiters look every idleLook.
	w.queueWD, err = unix.InotifyAddWatch(fd, filepath.Join(d.path, queueDir), queueMask|unix.IN_ONLYDIR|unix.IN_DONT_FOLLOW)
	for _, n := range names {
		if _, e := unix.InotifyAddWatch(fd, filepath.Join(d.path, n), leaseMask|unix.IN_DONT_FOLLOW); err == nil && e != unix.ENOENT {
			err = e
		}
	}
	if err != nil {
		w.f.Close()
		return nil
	}
	return w
}

// sleep waits for the next look: until the first event that matters
// (lease files' closes only with leases), not before poll/4, and at the
// latest after poll/4 following a lease file's close, poll when soon, else
// idleLook (poll without a watch). rested: soon was not set; ctx's error
// when ctx is done first.
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
