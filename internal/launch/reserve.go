package launch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/amdrun/amdrun/internal/launch/lease"
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/amdrun/amdrun/internal/topology"
)

// DefaultWaitPoll is how often a job queued for devices looks again.
const DefaultWaitPoll = 200 * time.Millisecond

// Reservation is what Reserve needs: the node, the request and how to
// treat other jobs' leases. Zero values are documented per field.
type Reservation struct {
	Model   *topology.Model
	Request selector.Request
	// Policy ranks the sets; the zero value is selector.Tree.
	Policy selector.Policy
	// Leases is the node's lease directory; nil means no leases are taken
	// or respected (--no-lease).
	Leases *lease.Dir
	// DryRun selects among the devices no one leases but takes no lease.
	DryRun bool
	// Wait is how long to queue when enough devices exist but other jobs
	// hold some: 0 fails at once, < 0 waits without limit.
	Wait time.Duration
	// Poll is how often a queued job looks again; 0 means DefaultWaitPoll.
	Poll time.Duration
	// Holder describes this job in its lease files (for ps and errors).
	Holder lease.Holder
	// Queued, when set, is called once with the reason when the job
	// starts waiting.
	Queued func(want int, why error)
}

// Reserve chooses the devices and leases them: selection runs under the
// node-wide lock, leaving out devices other jobs lease, and the lease on
// the chosen set is taken before the lock is released, so that two jobs
// never get one device. With Wait it queues, first come first served,
// until enough devices are free. The returned lease is nil with DryRun or
// without Leases; the caller releases it when the job ends.
//
// When not enough devices are free the error is the selector's
// *selector.NotEnoughError, listing what is free, leased and busy. Busy
// state is the one discovered at start: a queued job waits for other
// amdrun jobs' leases, not for other programs to leave a device.
func Reserve(ctx context.Context, r Reservation) (*selector.Choice, *lease.Lease, error) {
	if r.Leases == nil {
		c, err := selector.Select(r.Model, r.Request, r.Policy)
		return c, nil, err
	}
	keys := r.Model.Keys()
	if r.DryRun {
		holders, err := r.Leases.Held(keys)
		if err != nil {
			return nil, nil, err
		}
		c, err := selector.Select(r.Model, withHeld(r.Request, keys, holders), r.Policy)
		return c, nil, err
	}
	var choice *selector.Choice
	choose := func(holders map[string]lease.Holder) ([]string, error) {
		c, err := selector.Select(r.Model, withHeld(r.Request, keys, holders), r.Policy)
		var ne *selector.NotEnoughError
		if errors.As(err, &ne) && len(ne.Held) > 0 {
			// Enough devices exist, but other jobs hold some: worth waiting.
			return nil, fmt.Errorf("%w: %w", lease.ErrBusy, err)
		}
		if err != nil {
			return nil, err
		}
		choice = c
		chosen := make([]string, len(c.Devices))
		for i, dev := range c.Devices {
			chosen[i] = keys[dev]
		}
		return chosen, nil
	}
	l, err := r.Leases.Claim(ctx, keys, r.Holder, choose, 0)
	if err == nil || r.Wait == 0 || !errors.Is(err, lease.ErrBusy) {
		return choice, l, unwrapBusy(err)
	}
	if r.Queued != nil {
		want := r.Request.N
		var ne *selector.NotEnoughError
		if errors.As(err, &ne) {
			want = ne.Requested
		}
		r.Queued(want, unwrapBusy(err))
	}
	wctx := ctx
	if r.Wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, r.Wait)
		defer cancel()
	}
	poll := r.Poll
	if poll <= 0 {
		poll = DefaultWaitPoll
	}
	l, err = r.Leases.Claim(wctx, keys, r.Holder, choose, poll)
	if err != nil && wctx.Err() != nil && ctx.Err() == nil {
		return nil, nil, fmt.Errorf("gave up waiting for devices after %s", r.Wait)
	}
	return choice, l, unwrapBusy(err)
}

// withHeld marks the devices other jobs lease in a copy of req.
func withHeld(req selector.Request, keys []string, holders map[string]lease.Holder) selector.Request {
	req.Held = map[int]string{}
	for i, k := range keys {
		if h, ok := holders[k]; ok {
			req.Held[i] = DescribeHolder(h)
		}
	}
	return req
}

// unwrapBusy drops the lease.ErrBusy wrapper the chooser adds, so the
// user sees the selector's message.
func unwrapBusy(err error) error {
	var ne *selector.NotEnoughError
	if errors.As(err, &ne) {
		return ne
	}
	return err
}

// DescribeHolder says who holds a lease in a few words, on one line:
// errors are one line, and a holder's command may be a multi-line
// python -c.
func DescribeHolder(h lease.Holder) string {
	cmd := strings.Join(strings.Fields(h.Command), " ")
	if r := []rune(cmd); len(r) > 60 {
		cmd = string(r[:57]) + "..."
	}
	return fmt.Sprintf("leased by %s pid %d since %s: %s", h.User, h.PID, h.Start.Format("15:04:05"), cmd)
}
