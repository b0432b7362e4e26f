package job

import (
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/launch"
)

// Ranks are this node's ranks, worked out once by resolveRanks. The zero
// value is one rank per free device, or one CPU rank, said in one line,
// where no GPU is found.
type Ranks struct {
	// GPUs is the number of devices to choose; 0: every free device.
	GPUs int
	// N is the number of ranks on this node; 0: one per device chosen.
	// With GPUs > N each rank gets GPUs/N devices.
	N int
	// CPU runs CPU ranks without looking for a GPU.
	CPU bool
	// PerCPU makes CPU ranks one per CPU amdrun may use; false: N (0: 1).
	PerCPU bool
	// NoGPU is what a node where no GPU is found runs; NoGPUOK lets a
	// Slurm task granted GPUs run CPU ranks then (an explicit --ngpus 0).
	NoGPU   NoGPU
	NoGPUOK bool
}

// NoGPU is what a job does on a node where auto-detection finds no GPU.
type NoGPU int

// SayCPU runs CPU ranks and says so in one line; QuietCPU without a word
// (a request that counts ranks, issue 31); NeedGPU fails.
const (
	SayCPU NoGPU = iota
	QuietCPU
	NeedGPU
)

// CPURanks is the number of CPU ranks, numCPU called only with PerCPU.
func (r Ranks) CPURanks(numCPU func() int) int {
	if r.PerCPU {
		return max(1, numCPU())
	}
	return max(1, r.N)
}

// resolveRanks works out o.Ranks from --ngpus (else slurmGPUs on several
// nodes) and --nproc-per-node.
func (o *Options) resolveRanks(l *CommandLine, slurmGPUs int) error {
	ngpus, _ := strconv.Atoi(l.NGPUs.String()) // an int flag: pflag read it
	given := l.NGPUs.Given()
	if ngpus < 0 {
		return usageErrorf("--ngpus must be at least 0 (0 means every free device), got %d", ngpus)
	}
	if !given && o.NNodes > 1 {
		ngpus = slurmGPUs
	}
	r := Ranks{GPUs: ngpus, N: ngpus, NoGPUOK: given && ngpus == 0}
	np := &l.NProcPerNode
	switch v := strings.TrimSpace(np.String()); v {
	case "":
	case "gpu":
		r.NoGPU = NeedGPU
	case "auto":
		r.PerCPU = true
		if !given {
			r.NoGPU = QuietCPU
		}
	case "cpu":
		if given && ngpus > 0 {
			return usageErrorf("%s cpu runs ranks without GPUs: it cannot be used with --ngpus %d", np.Label(), ngpus)
		}
		r = Ranks{CPU: true, PerCPU: true, NoGPUOK: r.NoGPUOK}
	case "xpu":
		return usageErrorf("%s xpu: amdrun runs on AMD and NVIDIA GPUs, not Intel XPUs", np.Label())
	default:
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return usageErrorf("%s: want a number of ranks or a word, got %q", np.Label(), v)
		}
		if most, why := launch.RankLimit(); n > most {
			return usageErrorf("%s %d: more ranks than this node can run: at most %d (%s)", np.Label(), n, most, why)
		}
		r.N = n
		switch {
		case !given:
			r.GPUs, r.NoGPU = n, QuietCPU
		case ngpus == 0:
			r.CPU = true // --ngpus 0 --nproc-per-node N: N CPU ranks
		case ngpus%n != 0:
			return usageErrorf("--ngpus %d does not split over %s %d ranks: each rank gets ngpus/nproc devices", ngpus, np.Label(), n)
		}
	}
	if o.Agent && r.N == 0 && !r.CPU {
		r.N, r.GPUs, r.PerCPU = 1, 1, false // torchrun's default --nproc-per-node
	}
	o.Ranks = r
	return o.checkRanks(l)
}

// checkRanks refuses ranks the job cannot run, in one line each.
func (o *Options) checkRanks(l *CommandLine) error {
	r := o.Ranks
	switch torchrun := o.Launcher == "torchrun"; {
	case r.CPU && (o.Devices != nil || o.Exclude != nil):
		return usageErrorf("--devices and --exclude choose GPUs: they do not apply to CPU ranks (--ngpus 0 or --nproc-per-node cpu)")
	case torchrun && r.N == 0 && !r.CPU && !l.DryRun.On():
		return usageErrorf("--launcher torchrun needs --ngpus or --nproc-per-node N")
	case torchrun && r.N > 1 && r.GPUs > r.N:
		return usageErrorf("--launcher torchrun shows every worker all the devices: several devices per rank need --launcher amdrun (or --nproc-per-node 1)")
	case o.NNodes > 1 && r.N == 0 && !r.CPU:
		return usageErrorf("--nnodes %d needs --ngpus or --nproc-per-node N: every node must run the same number of ranks", o.NNodes)
	}
	for _, lr := range o.RanksFilter {
		if r.N > 0 && lr >= r.N {
			return usageErrorf("%s: local rank %d does not exist with %d rank(s) (0-%d)", l.LocalRanksFilter.Label(), lr, r.N, r.N-1)
		}
	}
	return nil
}
