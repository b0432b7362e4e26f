package job

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/amdrun/amdrun/internal/lease"
	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/topology"
)

// cpuGroups reads the host's sockets and caches for --bind socket and
// core-complex; where it cannot, it binds to NUMA nodes, said in one line.
func cpuGroups(o *Options, bind plan.BindMode, nodes []topology.NUMANode) (plan.BindMode, *topology.CPUGroups) {
	if bind != plan.BindSocket && bind != plan.BindCoreComplex || len(nodes) == 0 || o.HostCPUGroups == nil {
		return bind, nil
	}
	g, err := o.HostCPUGroups(nodes)
	gap := ""
	switch {
	case err != nil:
		gap = err.Error()
	case bind == plan.BindSocket:
		gap = g.SocketsGap
	default:
		gap = g.L3Gap
	}
	if gap != "" {
		o.Warn.Warn("bind %s: ranks are bound to their NUMA nodes: %s", bind, gap)
		return plan.BindNUMA, nil
	}
	return bind, g
}

// cpuLeaser makes a job's plan with its CPU lease, under the node lock:
// ranks bound exclusive or core-complex get CPUs no other amdrun job
// leases, and lease them (not in a dry run).
type cpuLeaser struct {
	ctx    context.Context
	o      *Options
	dryRun bool
	held   *lease.Lease // the CPUs leased, after plan
}

// plan is plan.NewPlan(s) around the CPUs other jobs lease.
func (c *cpuLeaser) plan(s plan.Spec) (*plan.Plan, error) {
	if !s.Bind.LeasesCPUs() || c.o.NoLease || c.o.Leases == nil {
		return plan.NewPlan(s)
	}
	dir, err := c.o.Leases(!c.dryRun)
	if err != nil {
		if !errors.Is(err, lease.ErrNotSupported) {
			c.o.Warn.Warn("bind %s: CPUs are not leased (other amdrun jobs may bind to them): %v", s.Bind, err)
		}
		return plan.NewPlan(s)
	}
	defer dir.Close()
	if dir.Owner() < 0 {
		// A dry run on a node where no job ever ran: no lease to respect.
		return plan.NewPlan(s)
	}
	unlock, err := dir.Lock(c.ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	held, err := dir.HeldCPUs(plan.UsableCPUs(s.HostNUMA, s.AllowedCPUs))
	if err != nil {
		c.o.Warn.Warn("bind %s: CPUs are not leased (other amdrun jobs may bind to them): %v", s.Bind, err)
		return plan.NewPlan(s)
	}
	s.BusyCPUs = slices.Sorted(maps.Keys(held))
	p, err := plan.NewPlan(s)
	if err != nil || c.dryRun || len(p.LeaseCPUs) == 0 {
		return p, err
	}
	if c.held, err = dir.AcquireCPUs(p.LeaseCPUs); err != nil {
		return nil, err
	}
	return p, nil
}
