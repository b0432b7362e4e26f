// Package reserve chooses a job's devices and leases them as one step
// (see Devices; docs/shared-nodes.md). Scoring is internal/selector's, the
// lease files internal/lease's.
package reserve

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/amdrun/amdrun/internal/lease"
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/amdrun/amdrun/internal/topology"
)

// Variables so that tests shorten them.
var (
	// waitPoll is how often a job queued for devices looks again.
	waitPoll = 200 * time.Millisecond
	// settleTime is how long a queued job keeps waiting for a device whose
	// lease was just released but which a fresh discovery still shows busy:
	// the driver frees a dead job's memory a little later (90 ms on the H200).
	settleTime = 10 * time.Second
	// nodeLockWait bounds how long a job that does not --wait waits for the
	// node lock: jobs hold it for milliseconds, so one held for seconds is
	// stuck, and the job fails naming the holder instead of hanging.
	nodeLockWait = 3 * time.Second
)

// refreshEvery spaces the discoveries (vendor tool runs) while settling.
const refreshEvery = 500 * time.Millisecond

// Options is what Devices needs; zero values are documented per field.
type Options struct {
	Model   *topology.Model
	Request selector.Request
	// Policy ranks the sets; the zero value is selector.Tree.
	Policy selector.Policy
	// Leases is the node's lease directory; nil: --no-lease.
	Leases *lease.Dir
	// DryRun selects among the devices no one leases but takes no lease.
	DryRun bool
	// Wait is how long to wait for devices other jobs hold and for the
	// node lock, in all: 0 waits for nothing but nodeLockWait for the node
	// lock, < 0 waits without limit.
	Wait time.Duration
	// Queued, when set, is called once with the reason when the job
	// starts waiting; ahead is lease.Dir.Queue, the jobs queued before it.
	Queued func(want int, why error, ahead []lease.Waiting)
	// Refresh, when set, discovers the node again. A queued job calls it
	// when a device another job leased becomes free and takes the fresh
	// busy state: a leased device is usually busy with that job's memory.
	Refresh func(context.Context) (*topology.Model, error)
}

// Devices chooses the devices and leases them: selection runs under the
// node-wide lock, leaving out devices other jobs lease or whose lease file
// cannot be used, and the chosen set is leased before the lock goes. With
// Wait it queues, first come first served, until enough devices are free;
// every wait (for the node lock too) ends at Wait, and SIGTERM, SIGINT,
// SIGHUP and SIGQUIT end it with a *SignalError. The lease is nil with
// DryRun or without Leases; the caller releases it when the job ends.
// When not enough devices are free the error is the selector's
// *selector.NotEnoughError. Busy state is the one discovered at start,
// refreshed (Refresh) when a leased device becomes free: a queued job
// waits for other amdrun jobs' leases, not for other programs.
func Devices(ctx context.Context, r Options) (*selector.Choice, *lease.Lease, error) {
	if r.Wait > 0 && r.Leases != nil && !r.DryRun {
		return devicesCatching(ctx, r)
	}
	return devices(ctx, r)
}

func devices(ctx context.Context, r Options) (*selector.Choice, *lease.Lease, error) {
	// The pairs are weighed once; each Select reads the busy state afresh
	// (refreshBusy updates it in place).
	pp := selector.Prepare(r.Model)
	if r.Leases == nil {
		c, err := pp.Select(r.Request, r.Policy)
		return c, nil, err
	}
	keys := r.Model.Keys()
	if r.DryRun {
		holders, err := r.Leases.Held(keys)
		if err != nil {
			return nil, nil, err
		}
		c, err := pp.Select(withHeld(r.Request, keys, holders), r.Policy)
		return c, nil, err
	}
	var choice *selector.Choice
	st := settle{keys: keys, since: map[int]time.Time{}}
	choose := func(holders map[string]lease.State) ([]string, error) {
		req := withHeld(r.Request, keys, holders)
		if r.Refresh != nil {
			st.look(ctx, r, holders, time.Now(), req.Held)
		}
		c, err := pp.Select(req, r.Policy)
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
	need := max(r.Request.N, 1)
	wctx, limit := ctx, r.Wait // without Wait, only the node lock's wait is bounded
	if r.Wait == 0 {
		limit = nodeLockWait
	}
	if limit > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	l, err := r.Leases.Claim(wctx, keys, need, choose, 0)
	if err == nil || r.Wait == 0 || !errors.Is(err, lease.ErrBusy) {
		return choice, l, r.explain(ctx, err)
	}
	if err := r.Leases.QueueRoom(len(keys)); err != nil {
		return nil, nil, err // this user's queue is full: no waiting
	}
	if r.Queued != nil {
		want := r.Request.N
		var ne *selector.NotEnoughError
		if errors.As(err, &ne) {
			want = ne.Requested
		}
		r.Queued(want, unwrapBusy(err), r.Leases.Queue(len(keys)))
	}
	l, err = r.Leases.Claim(wctx, keys, need, choose, waitPoll)
	return choice, l, r.explain(ctx, err)
}

// settle follows the devices other jobs release: one leased at the last
// look and free now makes the node be discovered again, and if still busy
// is waited for as if leased, up to settleTime, rediscovered every
// refreshEvery.
type settle struct {
	keys        []string
	heldBefore  map[string]lease.State
	since       map[int]time.Time // device -> when its lease went
	lastRefresh time.Time
}

// look refreshes the busy state as needed and marks settling devices held.
func (s *settle) look(ctx context.Context, r Options, holders map[string]lease.State, now time.Time, held map[int]string) {
	newly := false
	for i, k := range s.keys {
		_, was := s.heldBefore[k]
		if _, leased := holders[k]; was && !leased {
			s.since[i], newly = now, true
		}
	}
	s.heldBefore = holders
	if newly || (len(s.since) > 0 && now.Sub(s.lastRefresh) >= refreshEvery) {
		r.refreshBusy(ctx, s.keys)
		s.lastRefresh = now
	}
	for i, t0 := range s.since {
		if !r.Model.Devices[i].Busy || now.Sub(t0) > settleTime {
			delete(s.since, i)
			continue
		}
		if _, ok := held[i]; !ok {
			held[i] = "released by another job, its memory not yet freed"
		}
	}
}

// refreshBusy copies a fresh discovery's busy state into the model by
// device key; a failed discovery keeps the old state.
func (r Options) refreshBusy(ctx context.Context, keys []string) {
	fresh, err := r.Refresh(ctx)
	if err != nil {
		return
	}
	byKey := map[string]topology.Device{}
	for i, k := range fresh.Keys() {
		byKey[k] = fresh.Devices[i]
	}
	for i, k := range keys {
		if d, ok := byKey[k]; ok {
			m := &r.Model.Devices[i]
			m.Busy, m.BusyReason, m.Processes = d.Busy, d.BusyReason, d.Processes
			m.MemUsedMiB, m.MemUsedPct, m.UtilPercent = d.MemUsedMiB, d.MemUsedPct, d.UtilPercent
		}
	}
}

// explain turns Claim's error into the one the user sees: the selector's
// for busy devices, what it waited for when the wait (not ctx) ran out.
func (r Options) explain(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var le *lease.LockedError
	switch {
	case ctx.Err() != nil:
		return err
	case errors.As(err, &le) && r.Wait == 0:
		return fmt.Errorf("%w (--wait=DURATION waits for it longer)", err)
	case errors.As(err, &le):
		return fmt.Errorf("gave up waiting for devices after %s: %w", r.Wait, err)
	case errors.Is(err, context.DeadlineExceeded):
		var we *lease.WaitError
		if errors.As(err, &we) && we.Behind != nil {
			return fmt.Errorf("gave up waiting for devices after %s, behind %s in the queue", r.Wait, we.Behind)
		}
		return fmt.Errorf("gave up waiting for devices after %s", r.Wait)
	}
	return unwrapBusy(err)
}

// withHeld marks the devices in holders held in a copy of req.
func withHeld(req selector.Request, keys []string, holders map[string]lease.State) selector.Request {
	req.Held = map[int]string{}
	for i, k := range keys {
		if s, ok := holders[k]; ok {
			req.Held[i] = DescribeHolder(s)
		}
	}
	return req
}

// unwrapBusy drops the chooser's lease.ErrBusy wrapper.
func unwrapBusy(err error) error {
	var ne *selector.NotEnoughError
	if errors.As(err, &ne) {
		return ne
	}
	return err
}

// DescribeHolder says on one line why a device cannot be leased: "leased
// by pid 42 (alice: amdrun -n 2 train.py), started 15:04:05", or
// "unusable lease file" (the warning printed once names the path).
func DescribeHolder(s lease.State) string {
	if s.Fault != nil {
		return "unusable lease file"
	}
	return "leased by " + s.Holder.String()
}
