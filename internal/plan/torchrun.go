package plan

import (
	"cmp"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/envlist"
)

// Torchrun says how to hand a planned node to torchrun, which runs the
// rendezvous and starts the ranks on the devices amdrun leased.
type Torchrun struct {
	// UserEnv is amdrun's environment: the rank variables set there are
	// kept, the plan's dropped.
	UserEnv []string
	// ElasticNNodes is --nnodes MIN:MAX; "": the plan's NNodes.
	ElasticNNodes string
	// Rdzv are the --rdzv_* settings by name (rdzvNames).
	Rdzv map[string]string
	// Module and NoPython choose torchrun's -m / --no-python.
	Module, NoPython bool
	// Extra are more torchrun flags, passed before the script.
	Extra []string
	// Args are SCRIPT ARGS..., as the user gave them.
	Args []string
	// Shim, when set, is amdrun's bind shim, run as a --no_python
	// entrypoint that binds each worker by LOCAL_RANK and execs the
	// plan's argv (instead of Module, NoPython and Args).
	Shim []string
	// Agent is the command of torch's elastic agent; nil: ["torchrun"].
	Agent []string
}

// rdzvNames are torchrun's rendezvous settings in the order passed.
var rdzvNames = []string{"backend", "endpoint", "id", "conf"}

// TorchrunPlan replaces p's ranks with one torchrun process: the chosen
// devices visible, --nproc_per_node len(p.Ranks), p's place in the job
// and its MaxRestarts (the plan returned has 0: torchrun restarts). Its
// env is rank 0's without the rank contract, but for what the user set.
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
	// Underscore spellings: torch 1.9 on takes them, the hyphenated ones
	// only 2.0 on.
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
		argv = append(append(argv, "--no_python"), t.Args...)
	case t.Module:
		argv = append(append(argv, "-m"), t.Args...)
	default:
		argv = append(argv, t.Args...)
	}
	one := r0
	one.Argv, one.Env, one.CPUs, one.Mems, one.MemPolicy = argv, env, nil, nil, MemNone
	return &Plan{Ranks: []Rank{one}, WorldSize: p.WorldSize, Bound: BindNone}
}
