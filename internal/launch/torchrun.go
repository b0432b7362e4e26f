package launch

import (
	"strconv"
	"strings"
)

// Torchrun says how to hand a planned node over to torchrun (elastic
// jobs: torchrun runs the rendezvous and starts the ranks; amdrun has
// chosen the devices and holds their lease).
type Torchrun struct {
	// UserEnv is amdrun's own environment: rank variables the user set
	// there are kept, the ones the plan set are dropped (torchrun sets
	// them itself).
	UserEnv []string
	// NNodes is torchrun's --nnodes: a count or MIN:MAX.
	NNodes string
	// NodeRank, MasterAddr and MasterPort are used for a static
	// multi-node job without rendezvous flags.
	NodeRank   int
	MasterAddr string
	MasterPort int
	// Rdzv are torchrun's --rdzv-* flags ("--rdzv-backend" -> value),
	// passed through in a fixed order.
	Rdzv map[string]string
	// MaxRestarts is torchrun's --max-restarts (0: not passed).
	MaxRestarts int
	// Module and NoPython choose torchrun's -m / --no-python.
	Module, NoPython bool
	// Args are SCRIPT ARGS..., as the user gave them.
	Args []string
}

// rdzvFlags are torchrun's rendezvous flags, in the order they are passed.
var rdzvFlags = []string{"--rdzv-backend", "--rdzv-endpoint", "--rdzv-id", "--rdzv-conf"}

// TorchrunPlan replaces p's ranks with one process: torchrun with the
// chosen devices visible and --nproc-per-node len(p.Ranks). Its env is
// rank 0's without the rank contract (RankVars other than the
// visible-device ones), except what the user set. It is pure.
func TorchrunPlan(p *Plan, t Torchrun) *Plan {
	r0 := p.Ranks[0]
	own := map[string]bool{}
	for _, k := range RankVars {
		own[k] = !strings.HasSuffix(k, "VISIBLE_DEVICES") && k != EnvCUDAOrder
	}
	var env []string
	for _, kv := range r0.Env {
		k, _, _ := strings.Cut(kv, "=")
		if _, userSet := LookupEnv(t.UserEnv, k); own[k] && !userSet {
			continue
		}
		env = append(env, kv)
	}
	argv := []string{"torchrun", "--nproc-per-node", strconv.Itoa(len(p.Ranks)), "--nnodes", t.NNodes}
	if len(t.Rdzv) == 0 {
		if t.NNodes == "1" {
			argv = append(argv, "--standalone")
		} else {
			argv = append(argv, "--node-rank", strconv.Itoa(t.NodeRank), "--master-addr", t.MasterAddr,
				"--master-port", strconv.Itoa(t.MasterPort))
		}
	}
	for _, k := range rdzvFlags {
		if v, ok := t.Rdzv[k]; ok {
			argv = append(argv, k, v)
		}
	}
	if t.MaxRestarts > 0 {
		argv = append(argv, "--max-restarts", strconv.Itoa(t.MaxRestarts))
	}
	switch {
	case t.NoPython:
		argv = append(argv, "--no-python")
	case t.Module:
		argv = append(argv, "-m")
	}
	argv = append(argv, t.Args...)
	one := r0
	one.Argv, one.Env, one.CPUs, one.Mems, one.MemPolicy = argv, env, nil, nil, MemNone
	return &Plan{Ranks: []Rank{one}, WorldSize: p.WorldSize, Bind: BindNone, Mem: MemNone}
}
