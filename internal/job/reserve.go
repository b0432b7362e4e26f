package job

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/lease"
	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/reserve"
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/amdrun/amdrun/internal/topology"
)

// placement is where a job's ranks run: devices chosen on a model (and
// their lease), or CPU ranks on a node without GPUs.
type placement struct {
	model    *topology.Model
	mask     *plan.Mask
	choice   *selector.Choice
	held     *lease.Lease
	cpuRanks int
}

func (p *placement) release() {
	if p.held != nil {
		p.held.Release()
	}
}

// place discovers the node and chooses and leases the devices, or
// places CPU ranks.
func place(ctx context.Context, o *Options, env []string, dryRun bool) (*placement, error) {
	if o.Ranks.CPU {
		return &placement{cpuRanks: o.Ranks.CPURanks(o.NumCPU)}, nil
	}
	m, err := o.Topology(ctx)
	if err != nil {
		return cpuFallback(o, err)
	}
	mask, err := plan.ParseMask(env, m.Devices)
	if err != nil {
		return nil, err
	}
	if mask, err = o.grantMask(m, mask); err != nil {
		return nil, err
	}
	res, err := reservation(o, m, mask, dryRun)
	if err != nil {
		return nil, err
	}
	choice, held, err := reserve.Devices(ctx, res)
	if err != nil {
		return nil, userError(err)
	}
	pl := &placement{model: m, mask: mask, choice: choice, held: held}
	if n := o.Ranks.N; n > 0 && len(choice.Devices)%n != 0 {
		// Cannot happen, but a plan must not be wrong.
		pl.release()
		return nil, fmt.Errorf("%d devices do not split over %d ranks", len(choice.Devices), n)
	}
	return pl, nil
}

// cpuFallback is the placement when discovery failed with err: CPU ranks
// where auto-detection found no GPU and nothing names GPUs, else err.
func cpuFallback(o *Options, err error) (*placement, error) {
	if !o.SourceAuto || !errors.Is(err, discover.ErrNoGPU) {
		return nil, err
	}
	if o.Grant.Granted() && !o.Ranks.NoGPUOK {
		// CPU ranks would waste the grant and hide the fault.
		return nil, fmt.Errorf("slurm granted this task GPUs (%s) but amdrun finds none: %w (--ngpus 0 runs CPU ranks instead)", o.Grant, err)
	}
	switch {
	case o.Ranks.NoGPU == NeedGPU:
		return nil, fmt.Errorf("--nproc-per-node gpu: %w", err)
	case o.Devices != nil || o.Exclude != nil:
		return nil, fmt.Errorf("--devices/--exclude name GPUs: %w", err)
	}
	n := o.Ranks.CPURanks(o.NumCPU)
	if o.Ranks.NoGPU != QuietCPU {
		o.Warn.Warn("no GPU found on this machine: running %d CPU rank(s) (use the gloo backend; --source example plans on the bundled example topology)", n)
	}
	return &placement{cpuRanks: n}, nil
}

// grantMask bounds mask by the GPUs Slurm granted the task; devices the
// user's list names outside the grant are left out with one warning.
func (o *Options) grantMask(m *topology.Model, mask *plan.Mask) (*plan.Mask, error) {
	if !o.Grant.Granted() {
		return mask, nil
	}
	allowed, err := o.Grant.Devices(m.Devices, mask.Candidates() != nil, o.Warn.Warn)
	if err != nil {
		return nil, err
	}
	out, dropped, err := mask.Within(allowed, o.Grant.String())
	if err != nil {
		return nil, err
	}
	if len(dropped) > 0 {
		o.Warn.Warn("devices %s are visible but not granted to this task (%s): left out", topology.FormatCPUList(dropped), o.Grant)
	}
	return out, nil
}

// reservation is what reserve.Devices is asked on model m under mask.
func reservation(o *Options, m *topology.Model, mask *plan.Mask, dryRun bool) (reserve.Options, error) {
	req := selector.Request{
		N: o.Ranks.GPUs, Devices: mask.Narrow(o.Devices), Exclude: o.Exclude,
		AllowBusy: o.AllowBusy, Order: o.Order, Work: o.SearchWork, Budget: o.SearchBudget,
	}
	if !o.Explain && !dryRun {
		req.Alternatives = -1 // only --explain and the dry run (text, --json) print runner-ups
	}
	if o.Devices != nil && mask.Candidates() != nil && len(req.Devices) == 0 {
		return reserve.Options{}, fmt.Errorf("--devices %s names none of the devices the environment leaves visible (%s)",
			topology.FormatCPUList(o.Devices), topology.FormatCPUList(mask.Candidates()))
	}
	res := reserve.Options{Model: m, Request: req, Policy: o.Policy, DryRun: dryRun, Wait: o.Wait, Refresh: o.Rediscover,
		Queued: func(want int, why error, ahead []lease.Waiting) {
			fmt.Fprintf(o.Stderr, "amdrun: waiting for %d free device(s) (queued, %s): %v\n", want, queueAhead(ahead), userError(why))
		},
	}
	if o.NoLease {
		return res, nil
	}
	var err error
	res.Leases, err = o.Leases(!dryRun)
	if errors.Is(err, lease.ErrNotSupported) && dryRun {
		err = nil // planning on a system without flock leases: none to respect
	}
	return res, err
}

// userError rewrites the selector's errors in the user's flags.
func userError(err error) error {
	var ne *selector.NotEnoughError
	if !errors.As(err, &ne) {
		return err
	}
	msg := strings.TrimPrefix(ne.Error(), "selector: ")
	if ne.Requested > 0 {
		msg = strings.TrimPrefix(msg, fmt.Sprintf("%d devices requested, ", ne.Requested))
		msg = fmt.Sprintf("--ngpus %d: only %s", ne.Requested, msg)
	}
	return &reworded{msg: msg, err: err}
}

// reworded is an error shown with another message.
type reworded struct {
	msg string
	err error
}

func (e *reworded) Error() string { return e.msg }
func (e *reworded) Unwrap() error { return e.err }

// torchVersion asks the workers' interpreter, in the background, which
// torch it would import; "" when it cannot say (issue 33).
func torchVersion(ctx context.Context, o *Options) <-chan string {
	ch := make(chan string, 1)
	if o.Python == "" || o.Run == nil || len(o.Args) == 0 {
		ch <- ""
		return ch
	}
	go func() {
		// A slow interpreter must not hold the job.
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		out, err := o.Run(ctx, o.Python, "-c", plan.TorchVersionProbe)
		if err != nil {
			ch <- ""
			return
		}
		ch <- plan.ParseTorchVersion(out)
	}()
	return ch
}

// queueAhead says who waits before a job that joins the queue, at most
// three named.
func queueAhead(ahead []lease.Waiting) string {
	if len(ahead) == 0 {
		return "first in the queue"
	}
	var names []string
	for i, w := range ahead {
		if i == 3 {
			names = append(names, fmt.Sprintf("and %d more", len(ahead)-3))
			break
		}
		names = append(names, w.String())
	}
	return fmt.Sprintf("behind %d job(s): %s", len(ahead), strings.Join(names, "; "))
}
