package runcmd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/launch/lease"
	"github.com/amdrun/amdrun/internal/launch/numabalance"
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/amdrun/amdrun/internal/topology"
	"golang.org/x/sys/unix"
)

// waitPoll is how often a job queued with --wait looks again.
const waitPoll = 200 * time.Millisecond

// Run chooses devices, plans the ranks and either prints the plan
// (--dry-run) or runs it to the end.
func Run(ctx context.Context, o *Options) error {
	m, err := o.Topology(ctx)
	if err != nil {
		if !(o.DryRun && o.SourceAuto && errors.Is(err, discover.ErrNoGPU)) {
			return err
		}
		if m, err = discover.Example(); err != nil {
			return err
		}
		o.Warn.Warn("no GPU found on this machine; planning on the bundled example topology (%s)", m.Source)
	}
	env := o.Env()
	mask, err := launch.ParseMask(env, m.Devices)
	if err != nil {
		return err
	}
	req := selector.Request{
		N: o.NGPUs, Devices: intersect(o.Devices, mask.Candidates()), Exclude: o.Exclude,
		AllowBusy: o.AllowBusy, Order: o.Order,
	}
	if o.Devices != nil && mask.Candidates() != nil && len(req.Devices) == 0 {
		return fmt.Errorf("--devices %s names none of the devices the environment leaves visible (%s)",
			topology.FormatCPUList(o.Devices), topology.FormatCPUList(mask.Candidates()))
	}

	var (
		choice *selector.Choice
		held   *lease.Lease
	)
	if o.NoLease {
		choice, err = selector.Select(m, req, o.Policy)
	} else {
		choice, held, err = chooseWithLeases(ctx, o, m, req)
	}
	if err != nil {
		return err
	}
	if held != nil {
		defer held.Release()
	}

	plan, err := makePlan(o, m, mask, choice, env)
	if err != nil {
		return err
	}
	for _, w := range plan.Warnings {
		o.Warn.Warn("%s", w)
	}
	if o.DryRun && o.Launcher == "torchrun" {
		fmt.Fprintf(o.IO.Out, "Launcher: %s\n", quoteArgv(torchrunPlan(o, plan).Ranks[0].Argv))
	}
	if o.DryRun {
		if o.JSON {
			return printJSON(o, m, choice, plan)
		}
		printPlan(o.IO.Out, m, choice, plan)
		if o.Explain {
			printExplain(o.IO.Out, m, choice)
		}
		return nil
	}
	if o.Explain {
		printExplain(o.IO.ErrOut, m, choice)
	}
	restore, err := numabalance.Apply(o.Root, o.NUMABalancing)
	if err != nil {
		return err
	}
	defer func() {
		if err := restore(); err != nil {
			o.Warn.Warn("%v", err)
		}
	}()
	self, err := o.Executable()
	if err != nil {
		return fmt.Errorf("cannot find amdrun's own binary for binding: %w", err)
	}
	grace := o.Grace
	if grace == 0 {
		grace = time.Nanosecond // --grace 0: SIGKILL right after SIGTERM (launch's zero means its default)
	}
	restarts := o.MaxRestarts
	if o.Launcher == "torchrun" {
		plan, restarts = torchrunPlan(o, plan), 0 // torchrun restarts its workers itself
	}
	code, err := launch.Run(ctx, plan, launch.RunOptions{
		Stdout: o.IO.Out, Stderr: o.IO.ErrOut,
		Prefix:      !o.NoPrefix && len(plan.Ranks) > 1,
		LogDir:      o.LogDir,
		RanksFilter: o.RanksFilter,
		Grace:       grace,
		MaxRestarts: restarts,
		Self:        self,
	})
	if err != nil {
		return err
	}
	if code != 0 {
		return &cmdutil.ExitCodeError{Code: code}
	}
	return nil
}

// chooseWithLeases selects under the node-wide lock, leaving out devices
// other amdrun jobs hold, and takes the lease on the chosen set before the
// lock is released. With --wait it queues (first come, first served) until
// enough devices are free; the model's busy state is the one discovered at
// start, so it waits for other amdrun jobs' leases.
func chooseWithLeases(ctx context.Context, o *Options, m *topology.Model, req selector.Request) (*selector.Choice, *lease.Lease, error) {
	dirPath := o.LeaseDir
	if dirPath == "" {
		dirPath = getenv(o.Env(), "AMDRUN_LEASE_DIR")
	}
	var (
		d   *lease.Dir
		err error
	)
	if dirPath != "" {
		d, err = lease.Open(dirPath, o.Warn)
	} else {
		d, err = lease.OpenDefault(lease.DefaultDir, o.Warn)
	}
	if err != nil {
		return nil, nil, err
	}
	keys := m.Keys()
	withHeld := func(holders map[string]lease.Holder) selector.Request {
		r := req
		r.Held = map[int]string{}
		for i, k := range keys {
			if h, ok := holders[k]; ok {
				r.Held[i] = describe(h)
			}
		}
		return r
	}
	if o.DryRun {
		holders, err := d.Held(keys)
		if err != nil {
			return nil, nil, err
		}
		c, err := selector.Select(m, withHeld(holders), o.Policy)
		return c, nil, err
	}
	var choice *selector.Choice
	choose := func(holders map[string]lease.Holder) ([]string, error) {
		c, err := selector.Select(m, withHeld(holders), o.Policy)
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
	info := lease.CurrentHolder(nil)
	info.Command = "amdrun " + strings.Join(o.Args, " ")
	l, err := d.Claim(ctx, keys, info, choose, 0)
	if err == nil || o.Wait == 0 || !errors.Is(err, lease.ErrBusy) {
		return choice, l, unwrapBusy(err)
	}
	want := o.NGPUs
	var ne *selector.NotEnoughError
	if errors.As(err, &ne) {
		want = ne.Requested
	}
	fmt.Fprintf(o.IO.ErrOut, "amdrun: waiting for %d free device(s) (queued, first come first served): %v\n", want, unwrapBusy(err))
	wctx := ctx
	if o.Wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, o.Wait)
		defer cancel()
	}
	l, err = d.Claim(wctx, keys, info, choose, waitPoll)
	if err != nil && wctx.Err() != nil && ctx.Err() == nil {
		return nil, nil, fmt.Errorf("gave up waiting for devices after %s", o.Wait)
	}
	return choice, l, unwrapBusy(err)
}

// unwrapBusy drops the lease.ErrBusy wrapper chooseWithLeases adds, so
// the user sees the selector's message.
func unwrapBusy(err error) error {
	var ne *selector.NotEnoughError
	if errors.As(err, &ne) {
		return ne
	}
	return err
}

// describe says who holds a lease in a few words, on one line: errors
// are one line, and a holder's command may be a multi-line python -c.
func describe(h lease.Holder) string {
	cmd := strings.Join(strings.Fields(h.Command), " ")
	if r := []rune(cmd); len(r) > 60 {
		cmd = string(r[:57]) + "..."
	}
	return fmt.Sprintf("leased by %s pid %d since %s: %s", h.User, h.PID, h.Start.Format("15:04:05"), cmd)
}

// torchrunPlan replaces the per-rank plan with one process: torchrun
// with the chosen devices made visible, --nproc-per-node N, the node and
// rendezvous flags passed through, and the worker command. amdrun stays
// its parent, holding the device lease, forwarding signals and returning
// its exit code.
func torchrunPlan(o *Options, p *launch.Plan) *launch.Plan {
	r0 := p.Ranks[0]
	env := []string{}
	own := map[string]bool{}
	for _, k := range amdrunVars {
		own[k] = true
	}
	// torchrun sets the rank variables itself; keep only what the user had
	// and the visible-device variables amdrun chose.
	for _, kv := range r0.Env {
		k, _, _ := strings.Cut(kv, "=")
		if own[k] && !strings.HasSuffix(k, "VISIBLE_DEVICES") && k != "CUDA_DEVICE_ORDER" && getenv(o.Env(), k) == "" {
			continue
		}
		env = append(env, kv)
	}
	argv := []string{"torchrun", "--nproc-per-node", fmt.Sprint(len(p.Ranks))}
	nnodes := fmt.Sprint(o.NNodes)
	if o.ElasticNNodes != "" {
		nnodes = o.ElasticNNodes
	}
	argv = append(argv, "--nnodes", nnodes)
	if len(o.Rdzv) == 0 {
		if o.NNodes == 1 {
			argv = append(argv, "--standalone")
		} else {
			argv = append(argv, "--node-rank", fmt.Sprint(o.NodeRank), "--master-addr", o.MasterAddr, "--master-port", fmt.Sprint(o.MasterPort))
		}
	}
	for _, k := range []string{"--rdzv-backend", "--rdzv-endpoint", "--rdzv-id", "--rdzv-conf"} {
		if v, ok := o.Rdzv[k]; ok {
			argv = append(argv, k, v)
		}
	}
	if o.MaxRestarts > 0 {
		argv = append(argv, "--max-restarts", fmt.Sprint(o.MaxRestarts))
	}
	switch {
	case o.NoPython:
		argv = append(argv, "--no-python")
	case o.Module:
		argv = append(argv, "-m")
	}
	argv = append(argv, o.Args...)
	one := r0
	one.Argv, one.Env, one.CPUs, one.Mems = argv, env, nil, nil
	return &launch.Plan{Ranks: []launch.Rank{one}, WorldSize: p.WorldSize, Bind: launch.BindNone}
}

// makePlan turns the choice into per-rank commands, environment and binding.
func makePlan(o *Options, m *topology.Model, mask *launch.Mask, c *selector.Choice, env []string) (*launch.Plan, error) {
	chosen := make([]topology.Device, len(c.Devices))
	for i, d := range c.Devices {
		chosen[i] = m.Devices[d]
	}
	if err := mask.Check(chosen); err != nil {
		return nil, err
	}
	port := o.MasterPort
	if port == 0 {
		p, err := launch.FreePort()
		if err != nil {
			return nil, fmt.Errorf("cannot find a free port for MASTER_PORT (give --master-port): %w", err)
		}
		port = p
	}
	hostNUMA, err := o.HostNUMA()
	if err != nil {
		o.Warn.Warn("cannot read this host's NUMA nodes, ranks are not bound: %v", err)
		hostNUMA = nil
	}
	bind := o.Bind
	if bind == "" {
		bind = launch.BindNone
		if len(hostNUMA) > 1 {
			bind = launch.BindNUMA
		}
	}
	var allowed []int
	var cs unix.CPUSet
	if err := unix.SchedGetaffinity(0, &cs); err == nil {
		for cpu := 0; cpu < 8*1024; cpu++ {
			if cs.IsSet(cpu) {
				allowed = append(allowed, cpu)
			}
		}
	}
	argv := []string{"-"}
	if len(o.Args) > 0 {
		argv = workerArgv(o)
	}
	return launch.NewPlan(launch.Spec{
		Devices:     chosen,
		HostNUMA:    hostNUMA,
		AllowedCPUs: allowed,
		Argv:        argv,
		Env:         env,
		VisibleEnv:  mask.Env(chosen, m.Vendor),
		Bind:        bind,
		Mem:         o.Mem,
		NNodes:      o.NNodes,
		NodeRank:    o.NodeRank,
		MasterAddr:  o.MasterAddr,
		MasterPort:  port,
		RunID:       runID(),
		MaxRestarts: o.MaxRestarts,
	})
}

func runID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "amdrun-" + hex.EncodeToString(b[:])
}

// intersect returns the elements of a that are in b; nil if either is nil
// (no restriction).
func intersect(a, b []int) []int {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	in := map[int]bool{}
	for _, x := range b {
		in[x] = true
	}
	out := []int{}
	for _, x := range a {
		if in[x] {
			out = append(out, x)
		}
	}
	return out
}
