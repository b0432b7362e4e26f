package lease

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/amdrun/amdrun/internal/printable"
)

// The queue's rule, apart from the files that carry it, so that it can be
// tested on its own (TestQueueProperty); stated in docs/shared-nodes.md
// ("The rule").

// Patience is how long, in all, a waiter defers to older tickets that
// could start now (issue 26); after it they are passed over.
const Patience = 3 * time.Second

// Backfill is how long a ticket asking for more devices than are free
// lets later tickets start ahead of it.
const Backfill = 2 * time.Minute

// MaxTicketsPerUser is how many tickets of one user count in the queue;
// Enqueue refuses more (ErrQueueFull), and waiters ignore any beyond it.
const MaxTicketsPerUser = 16

// ErrQueueFull: this user already has MaxTicketsPerUser tickets waiting.
var ErrQueueFull = errors.New("too many jobs of this user waiting in the queue")

// Waiting is a ticket as the kernel vouches for it: the live process
// holding its lock, its user, its need, and when it joined (the file's
// inode change time, which only the kernel sets).
type Waiting struct {
	PID   int       `json:"pid"`
	UID   int       `json:"uid"`
	User  string    `json:"user,omitempty"`
	Need  int       `json:"need"`
	Since time.Time `json:"since"`
	ino   uint64    // the ticket file's: with PID, which ticket it is
	file  string    // its name in the queue
}

// String is "alice (pid 42): 8 device(s) since 15:04:05".
func (w Waiting) String() string {
	who := cmp.Or(w.User, fmt.Sprintf("uid %d", w.UID))
	return fmt.Sprintf("%s (pid %d): %d device(s) since %s", printable.String(who, 32), w.PID, w.Need, w.Since.Format("15:04:05"))
}

func (w Waiting) key() ticketKey { return ticketKey{w.PID, w.ino} }

// order orders tickets by arrival, then pid.
func order(a, b Waiting) int {
	if c := a.Since.Compare(b.Since); c != 0 {
		return c
	}
	return cmp.Compare(a.PID, b.PID)
}

func (w Waiting) before(o Waiting) bool { return order(w, o) < 0 }

// counting sorts tickets by arrival and keeps each user's first perUser.
func counting(all []Waiting, perUser int) []Waiting {
	s := slices.Clone(all)
	slices.SortFunc(s, order)
	seen := map[int]int{}
	return slices.DeleteFunc(s, func(w Waiting) bool { seen[w.UID]++; return seen[w.UID] > perUser })
}

// scanStats counts one look's work for tests: pids looked at, names looked up.
type scanStats struct {
	pids, lookups int
}

// rule is the queue's timing: Patience and Backfill, shortened in tests.
type rule struct {
	patience, backfill time.Duration
}

// clock is one waiter's patience: a look that defers counts the time
// since the previous look, so tickets that let free devices go by hold a
// waiter at most its patience plus one poll (TestQueueProperty).
type clock struct {
	spent time.Duration
	last  time.Time // the previous look; zero before the first
	// step is the most one gap counts (the poll; 0: no cap), or a sleep
	// until a lease went would pass over the waiter ahead.
	step time.Duration
	// by is the ticket last deferred to (if set): once it left, the gap
	// before the next look is not counted (TestQueueAtScale: the 31st of
	// a queue of short jobs spent its 3 s).
	by  ticketKey
	set bool
}

// turn applies the rule for one waiter to the counting tickets ahead,
// oldest first: whether it may try now, else the ticket holding it back.
func (r rule) turn(ahead []Waiting, free int, now time.Time, c *clock) (bool, *Waiting) {
	prev := c.last
	c.last = now
	if c.set && !slices.ContainsFunc(ahead, func(w Waiting) bool { return w.key() == c.by }) {
		prev = time.Time{} // the ticket it deferred to left (see clock.by)
	}
	for i := range ahead {
		t := &ahead[i]
		if t.Need > free {
			if now.Sub(t.Since) >= r.backfill {
				return false, t // waited long enough: it keeps its place
			}
			continue // backfill: it could not use the free devices now
		}
		if c.spent >= r.patience {
			continue // patience spent: t let free devices go by; passed over
		}
		if gap := now.Sub(prev); !prev.IsZero() {
			if c.step > 0 {
				gap = min(gap, c.step)
			}
			c.spent += gap
		}
		if c.spent >= r.patience {
			continue
		}
		c.by, c.set = t.key(), true
		return false, t
	}
	return true, nil
}
