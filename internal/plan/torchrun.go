package plan

import (
	"cmp"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/envlist"
)

// Torchrun says how to hand a planned node over to torchrun (elastic
// jobs: torchrun runs the rendezvous and starts the ranks; amdrun has
// chosen the devices and holds their lease).
type Torchrun struct {
	// UserEnv is amdrun's own environment: rank variables the user set
	// there are kept, the ones the plan set are dropped (torchrun sets
	// them itself).
	UserEnv []string
	// ElasticNNodes is torchrun's --nnodes MIN:MAX; "" means Settings'
	// NNodes (0 meaning 1).
	ElasticNNodes string
	// Rdzv are torchrun's rendezvous settings by name ("backend",
	// "endpoint", "id", "conf" for --rdzv_backend ...), passed through in
	// that order.
	Rdzv map[string]string
	// Module and NoPython choose torchrun's -m / --no-python.
	Module, NoPython bool
	// Extra are more torchrun flags, already in the spelling every
	// torchrun accepts, passed before the script in the order given.
	Extra []string
	// Args are SCRIPT ARGS..., as the user gave them.
	Args []string
	// Shim, when set, is amdrun's bind shim with every local rank's
	// binding ([self, launch.ShimArg, launch.LocalShimArgs(p)...]): torchrun runs it as
	// a --no_python entrypoint, and it binds each worker by its
	// LOCAL_RANK and execs the rank's command (the plan's argv, which
	// then replaces Module, NoPython and Args).
	Shim []string
	// Agent is the command that runs torch's elastic agent; nil means
	// ["torchrun"]. amdrun hands a c10d/etcd or elastic job to
	// [python, -m, torch.distributed.run] of the workers' interpreter.
	Agent []string
}

// rdzvNames are torchrun's rendezvous settings, in the order they are
// passed.
var rdzvNames = []string{"backend", "endpoint", "id", "conf"}

// TorchrunPlan replaces p's ranks with one process: torchrun with the
// chosen devices visible, --nproc_per_node len(p.Ranks), p's place in
// the job (a static multi-node job without rendezvous flags) and p's
// MaxRestarts as --max_restarts (torchrun restarts the ranks: the plan
// returned has MaxRestarts 0, so launch.Run starts torchrun once). Its env is
// rank 0's without the rank contract (RankVars other than the
// visible-device ones), except what the user set. It is pure.
func TorchrunPlan(p *Plan, t Torchrun) *Plan {
	r0 := p.Ranks[0]
	own := map[string]bool{}
	for _, k := range RankVars {
		// The flight recorder's variables reach the workers through the agent.
		own[k] = !strings.HasSuffix(k, "VISIBLE_DEVICES") && k != EnvCUDAOrder &&
			!strings.HasPrefix(k, "TORCH_FR_") && !strings.HasPrefix(k, "TORCH_NCCL_TRACE") && k != frDumpOnTimeout
	}
	var env []string
	for _, kv := range r0.Env {
		k, _, _ := strings.Cut(kv, "=")
		if _, userSet := envlist.Lookup(t.UserEnv, k); own[k] && !userSet {
			continue
		}
		env = append(env, kv)
	}
	// Underscore spellings: torchrun accepts them from torch 1.9 to the
	// current release; the hyphenated ones only since torch 2.0 (1.13's
	// argparse rejects --nproc-per-node).
	argv := append([]string{}, t.Agent...)
	if len(argv) == 0 {
		argv = []string{"torchrun"}
	}
	nnodes := cmp.Or(t.ElasticNNodes, strconv.Itoa(max(1, p.NNodes)))
	argv = append(argv, "--nproc_per_node", strconv.Itoa(len(p.Ranks)), "--nnodes", nnodes)
	if len(t.Rdzv) == 0 {
		if nnodes == "1" {
			argv = append(argv, "--standalone")
		} else {
			argv = append(argv, "--node_rank", strconv.Itoa(p.NodeRank), "--master_addr", p.MasterAddr,
				"--master_port", strconv.Itoa(p.MasterPort))
		}
	}
	for _, k := range rdzvNames {
		if v, ok := t.Rdzv[k]; ok {
			argv = append(argv, "--rdzv_"+k, v)
		}
	}
	if p.MaxRestarts > 0 {
		argv = append(argv, "--max_restarts", strconv.Itoa(p.MaxRestarts))
	}
	argv = append(argv, t.Extra...)
	switch {
	case len(t.Shim) > 0:
		argv = append(append(argv, "--no_python"), t.Shim...)
		argv = append(append(argv, "--"), r0.Argv...)
	case t.NoPython:
		argv = append(argv, "--no_python")
	case t.Module:
		argv = append(argv, "-m")
	}
	if len(t.Shim) == 0 {
		argv = append(argv, t.Args...)
	}
	one := r0
	one.Argv, one.Env, one.CPUs, one.Mems, one.MemPolicy = argv, env, nil, nil, MemNone
	return &Plan{Ranks: []Rank{one}, WorldSize: p.WorldSize, Bound: BindNone}
}
