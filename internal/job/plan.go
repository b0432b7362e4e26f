package job

import (
	"cmp"

	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/lease"
	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/amdrun/amdrun/internal/topology"
)

// Plan is a planned job: the devices chosen and why, and every rank's
// command, environment and CPUs.
type Plan struct {
	// Model is the node the devices were chosen on; nil for CPU ranks.
	Model *topology.Model
	// Choice is the selector's choice; nil for CPU ranks.
	Choice *selector.Choice
	// Ranks is every rank's plan as amdrun would start them.
	Ranks *plan.Plan
	// Run is what is started: Ranks, or with Torchrun, the one torchrun
	// process that starts them.
	Run *plan.Plan
	// Torchrun says Run hands the node to torchrun (--launcher torchrun).
	Torchrun bool
	// Python is the ranks' interpreter ("" with NoPython), PythonFrom the
	// rule that chose it, TorchVersion its torch ("": none found).
	Python, PythonFrom, TorchVersion string

	held    *lease.Lease // the devices' lease, until release
	cpuHeld *lease.Lease // the CPUs' lease (exclusive, core-complex), until release
}

// release lets go of the plan's lease, if it holds one.
func (p *Plan) release() {
	for _, l := range []**lease.Lease{&p.held, &p.cpuHeld} {
		if *l != nil {
			(*l).Release()
			*l = nil
		}
	}
}

// planRanks turns a placement into the plan of every rank.
func planRanks(o *Options, pl *placement, env []string, hostNUMA []topology.NUMANode, torch string, cl *cpuLeaser) (*plan.Plan, error) {
	var chosen []topology.Device
	if pl.choice != nil {
		for _, d := range pl.choice.Devices {
			chosen = append(chosen, pl.model.Devices[d])
		}
	}
	if err := pl.mask.Check(chosen); err != nil { // a nil mask narrows nothing
		return nil, err
	}
	per := 1 // devices per rank
	if n := o.Ranks.N; n > 0 {
		per = max(1, len(chosen)/n)
	}
	if o.CPUsPerRank > 0 && !o.Bind.LeasesCPUs() {
		return nil, usageErrorf("--cpus-per-rank needs --bind exclusive or core-complex (CPUs of a rank's own), not %s", cmp.Or(o.Bind, "the default"))
	}
	own := launch.OwnCPUs
	if o.OwnCPUs != nil {
		own = o.OwnCPUs
	}
	s := plan.Spec{
		Devices: chosen, DevicesPerRank: per, CPURanks: pl.cpuRanks, NodeDevices: nodeDevices(pl.model), CPUsPerRank: o.CPUsPerRank,
		HostNUMA: hostNUMA, AllowedCPUs: own(),
		Argv: workerArgv(o), Env: env, Bind: o.Bind, Mem: o.Mem,
		Settings: o.Settings, TorchVersion: torch,
	}
	if len(chosen) > 0 {
		vendor := pl.model.Vendor
		if per > 1 || o.VirtualLocalRank {
			// Each rank sees its own devices only.
			for k := 0; k+per <= len(chosen); k += per {
				s.RankVisibleEnv = append(s.RankVisibleEnv, pl.mask.Env(chosen[k:k+per], vendor))
			}
		} else {
			s.VisibleEnv = pl.mask.Env(chosen, vendor)
		}
	}
	s.Bind, s.CPUGroups = cpuGroups(o, s.Bind, hostNUMA)
	return cl.plan(s)
}

// nodeDevices is plan.Spec.NodeDevices of m.
func nodeDevices(m *topology.Model) map[int][]int {
	if m == nil {
		return nil
	}
	out := map[int][]int{}
	for _, d := range m.Devices {
		if d.NUMANode >= 0 {
			out[d.NUMANode] = append(out[d.NUMANode], d.Index)
		}
	}
	return out
}

// workerArgv is the command each rank runs; "-" without a script.
func workerArgv(o *Options) []string {
	if len(o.Args) == 0 {
		return []string{"-"}
	}
	if o.NoPython {
		return append([]string(nil), o.Args...)
	}
	argv := []string{o.Python, "-u"}
	if o.Module {
		argv = append(argv, "-m")
	}
	return append(argv, o.Args...)
}
