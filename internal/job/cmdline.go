package job

import (
	"context"
	"fmt"
	"maps"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/slurm"
)

// UsageError is a misuse of the command line, in one line: the command
// adds a pointer to --help and exits with its usage status.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &UsageError{msg: fmt.Sprintf(format, args...)}
}

// Resolve reads the command line l (and the Slurm allocation amdrun runs
// in) into o, and refuses what cannot run in one line: a *UsageError, or
// the allocation's own error.
func (o *Options) Resolve(ctx context.Context, l *CommandLine) error {
	if err := o.parseNNodes(l); err != nil {
		return err
	}
	slurmGPUs, err := o.fromSlurm(ctx, l)
	if err != nil {
		return err
	}
	ranks := func(l *CommandLine) error { return o.resolveRanks(l, slurmGPUs) }
	for _, step := range []func(*CommandLine) error{o.parseValues, o.parseStall, o.resolveTorchrun, o.torchrunEnv, o.parseNUMABinding,
		o.noteAgentOnly, o.parseWait, o.resolveRendezvous, ranks, o.checkNodes, o.checkCommand} {
		if err := step(l); err != nil {
			return err
		}
	}
	return nil
}

// parseValues parses the durations and checks the signs and the search's
// bounds.
func (o *Options) parseValues(l *CommandLine) error {
	var err error
	if o.Grace, err = parseDuration(l.Grace.Label(), l.Grace.String()); err != nil {
		return err
	}
	if o.RestartWait, err = parseDuration(l.RestartWait.Label(), l.RestartWait.String()); err != nil {
		return err
	}
	switch {
	case o.Grace < 0:
		return usageErrorf("--grace must not be negative")
	case o.RestartWait < 0:
		return usageErrorf("--restart-wait must not be negative")
	case o.MaxRestarts < 0:
		return usageErrorf("%s must not be negative", l.MaxRestarts.Label())
	case o.SearchWork <= 0:
		return usageErrorf("--search-work must be positive, got %d", o.SearchWork)
	case o.SearchBudget <= 0:
		return usageErrorf("--search-budget must be positive, got %s", o.SearchBudget)
	case o.CPUsPerRank < 0:
		return usageErrorf("--cpus-per-rank must be at least 1 (0: the rank's fair share), got %d", o.CPUsPerRank)
	}
	return nil
}

// parseStall reads --stall-timeout: auto, off or 0, or a positive
// duration.
func (o *Options) parseStall(l *CommandLine) error {
	var err error
	switch v := strings.TrimSpace(l.StallTimeout.String()); v {
	case "auto", "":
		o.StallTimeout = launch.StallAuto
	case "off", "0":
		o.StallTimeout = 0
	default:
		if o.StallTimeout, err = parseDuration(l.StallTimeout.Label(), v); err != nil {
			return err
		}
		if o.StallTimeout <= 0 {
			return usageErrorf("%s must be positive, off or auto, got %s", l.StallTimeout.Label(), v)
		}
	}
	return nil
}

// parseWait reads --wait: absent, bare (forever) or a positive duration.
func (o *Options) parseWait(l *CommandLine) error {
	a := &l.Wait
	switch wait := a.String(); wait {
	case "":
	case "forever":
		o.Wait = -1
		if len(o.Args) > 0 {
			if _, err := time.ParseDuration(o.Args[0]); err == nil {
				return usageErrorf("%[1]s %[2]s: write %[1]s=%[2]s (with =) for a timeout; %[2]q would be taken as the script", a.Label(), o.Args[0])
			}
		}
	default:
		d, err := parseDuration(a.Label(), wait)
		if err != nil {
			return err
		}
		if d <= 0 {
			return usageErrorf("%s: want a duration such as 30s or 10m, got %q", a.Label(), wait)
		}
		o.Wait = d
	}
	return nil
}

// checkNodes checks this node's place in the job. Several nodes get
// torchrun's port 29500 (one node keeps a free port, so that two jobs
// cannot collide) and 127.0.0.1, which works only when every node runs
// here: a warning says so.
func (o *Options) checkNodes(l *CommandLine) error {
	if o.NNodes < 1 {
		return usageErrorf("%s must be at least 1, got %d", l.NNodes.Label(), o.NNodes)
	}
	if o.NodeRank < 0 || o.NodeRank >= o.NNodes {
		return usageErrorf("%s must be in 0..%d, got %d", l.NodeRank.Label(), o.NNodes-1, o.NodeRank)
	}
	if o.MasterPort < 0 || o.MasterPort > 65535 {
		return usageErrorf("%s must be in 1..65535, got %d", l.MasterPort.Label(), o.MasterPort)
	}
	if o.NNodes > 1 && o.MasterPort == 0 {
		o.MasterPort = plan.DefaultMasterPort
	}
	if o.NNodes > 1 && o.Slurm == nil && !l.MasterAddr.Given() && len(o.Rdzv) == 0 {
		o.Warn.Warn("--nnodes %d without --master-addr: the nodes meet at %s:%d, as with torchrun, so every node must run on this machine", o.NNodes, o.MasterAddr, o.MasterPort)
	}
	return nil
}

// checkCommand checks the interpreter and how the script is run.
func (o *Options) checkCommand(l *CommandLine) error {
	if l.Python.Given() && strings.TrimSpace(o.Python) == "" {
		return usageErrorf("--python: empty interpreter path")
	}
	if o.Module && o.NoPython {
		return usageErrorf("%s and %s cannot be used together", l.Module.Label(), l.NoPython.Label())
	}
	return nil
}

// resolveRendezvous reads --standalone and the --rdzv-* flags.
func (o *Options) resolveRendezvous(l *CommandLine) error {
	rdzv := map[string]string{"backend": l.RdzvBackend.String(), "endpoint": l.RdzvEndpoint.String(), "id": l.RdzvID.String(), "conf": l.RdzvConf.String()}
	maps.DeleteFunc(rdzv, func(_, v string) bool { return v == "" })
	if l.Standalone.On() {
		if o.NNodes != 1 || o.ElasticNNodes != "" {
			return usageErrorf("%s runs one node: it cannot be used with %s %s", l.Standalone.Label(), l.NNodes.Label(), l.NNodes.String())
		}
		// As torchrun, standalone picks its own rendezvous: say what is
		// dropped.
		var dropped []string
		for _, a := range []*Arg{&l.MasterAddr, &l.MasterPort, &l.RdzvBackend, &l.RdzvEndpoint, &l.RdzvID, &l.RdzvConf} {
			if a.Given() {
				dropped = append(dropped, a.Label())
			}
		}
		if len(dropped) > 0 {
			o.Warn.Warn("%s: ignoring %s (a standalone job rendezvouses on a free local port, as with torchrun)", l.Standalone.Label(), strings.Join(dropped, ", "))
		}
		o.MasterAddr, o.MasterPort, rdzv = plan.DefaultMasterAddr, 0, map[string]string{}
	}
	switch o.Launcher {
	case "amdrun":
		if o.handToAgent(rdzv) {
			return o.resolveRendezvous(l)
		}
		return o.ownRendezvous(l, rdzv)
	default: // "torchrun", the one other word of --launcher
		// The agent runs with --python, and its workers bound as --bind says.
		for _, a := range []*Arg{&l.Python, &l.NoPrefix, &l.Bind} {
			if a.Given() && !(o.Agent && a != &l.NoPrefix) {
				return usageErrorf("%s does not apply with --launcher torchrun (torchrun starts the ranks: give torchrun's own options through its environment or use --launcher amdrun)", a.Label())
			}
		}
		o.Rdzv = rdzv
		o.TorchrunArgs = torchrunArgs(l, o.Agent)
	}
	return nil
}

// ownRendezvous reads the rendezvous flags of a job amdrun runs itself:
// a static backend's endpoint is the master, --rdzv-id the run id, and
// --rdzv-conf on one node is explained.
func (o *Options) ownRendezvous(l *CommandLine, rdzv map[string]string) error {
	// Another backend is on one node: amdrun's store serves it.
	if ep, ok := rdzv["endpoint"]; ok && (rdzv["backend"] == "" || rdzv["backend"] == "static") {
		// torchrun: a static rendezvous's endpoint is the master.
		host, port, ok := splitHostPort(ep)
		if !ok {
			return usageErrorf("%s: want HOST:PORT, got %q", l.RdzvEndpoint.Label(), ep)
		}
		if (l.MasterAddr.Given() && l.MasterAddr.from == "" && o.MasterAddr != host) ||
			(l.MasterPort.Given() && l.MasterPort.from == "" && o.MasterPort != port) {
			return usageErrorf("%s %s and --master-addr/--master-port %s:%d disagree: give one", l.RdzvEndpoint.Label(), ep, o.MasterAddr, o.MasterPort)
		}
		o.MasterAddr, o.MasterPort = host, port
	}
	o.RunID = rdzv["id"]
	if c, ok := rdzv["conf"]; ok && o.NNodes == 1 {
		return o.rdzvConfOneNode(l.RdzvConf.Label(), c)
	}
	return nil
}

// splitHostPort splits HOST:PORT; false for an empty host or a port
// outside 1..65535.
func splitHostPort(s string) (string, int, bool) {
	host, p, err := net.SplitHostPort(s)
	port, perr := strconv.Atoi(p)
	return host, port, err == nil && perr == nil && port >= 1 && port <= 65535 && host != ""
}

// parseDuration parses a duration flag; a bare number's error says to
// add a unit.
func parseDuration(flag, s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err == nil {
		return d, nil
	}
	if _, nerr := strconv.ParseFloat(strings.TrimSpace(s), 64); nerr == nil && s != "0" {
		return 0, usageErrorf("%s %s: add a unit, e.g. %ss or %sm", flag, s, s, s)
	}
	return 0, usageErrorf("%s: want a duration such as 30s or 10m, got %q", flag, s)
}

// parseNNodes reads --nnodes: a count, or MIN:MAX for torchrun's elastic
// rendezvous.
func (o *Options) parseNNodes(l *CommandLine) error {
	v := l.NNodes.String()
	lo, hi, elastic := strings.Cut(v, ":")
	if !elastic {
		var err error
		if o.NNodes, err = strconv.Atoi(v); err != nil {
			return usageErrorf("%s: want a number of nodes, got %q", l.NNodes.Label(), v)
		}
		return nil
	}
	a, err1 := strconv.Atoi(lo)
	b, err2 := strconv.Atoi(hi)
	if err1 != nil || err2 != nil || a < 1 || b < a {
		return usageErrorf("%s: want N or MIN:MAX with 1 <= MIN <= MAX, got %q", l.NNodes.Label(), v)
	}
	o.NNodes = a
	if a != b { // torchrun's default "1:1" is one node, not a range
		o.ElasticNNodes, o.NNodes = v, 1
	}
	return nil
}

// fromSlurm reads the Slurm allocation amdrun runs in and fills the
// multi-node flags the user did not give from it; slurmGPUs is its GPUs
// per node. A step amdrun cannot run one per node is refused.
func (o *Options) fromSlurm(ctx context.Context, l *CommandLine) (slurmGPUs int, err error) {
	// scontrol only expands the node list, which ParseHostlist does too:
	// a scontrol that cannot reach its controller must not hold the job.
	run := func(name string, args ...string) ([]byte, error) {
		if o.Run == nil {
			return nil, fmt.Errorf("cannot run %s here", name)
		}
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return o.Run(ctx, name, args...)
	}
	job, err := slurm.FromEnvWith(o.Env(), run)
	if err != nil || job == nil {
		return 0, err
	}
	// The grant bounds the devices whatever the job's shape (issue 24).
	o.Slurm, o.Grant = job, job.Grant
	if l.NNodes.Given() && o.NNodes != job.NNodes {
		// A job of another shape inside the allocation: Slurm's ranks and
		// master do not apply.
		return 0, nil
	}
	if err := job.Launchable(); err != nil {
		return 0, err
	}
	o.Settings = slurm.Merge(o.Settings, slurm.Given{NNodes: l.NNodes.Given(), NodeRank: l.NodeRank.Given(), MasterAddr: l.MasterAddr.Given(), MasterPort: l.MasterPort.Given()}, job)
	if o.NNodes == 1 && !l.MasterPort.Given() && !l.MasterAddr.Given() {
		// One node: a free local port, so that two jobs there do not
		// collide.
		o.MasterAddr, o.MasterPort = plan.DefaultMasterAddr, 0
	}
	return job.NodeGPUs, nil
}

// handToAgent switches o to torch's elastic agent, with one line, for an
// elastic --nnodes MIN:MAX or a c10d/etcd rendezvous on several nodes:
// amdrun writes no rendezvous of its own (issue 23).
func (o *Options) handToAgent(rdzv map[string]string) bool {
	backend := rdzv["backend"]
	static := backend == "" || backend == "static"
	if o.ElasticNNodes == "" && (static || o.NNodes <= 1) {
		return false
	}
	o.Launcher, o.Agent = "torchrun", true
	what := "--nnodes " + o.ElasticNNodes
	if o.ElasticNNodes == "" {
		what = "--rdzv-backend " + backend + " on several nodes"
	}
	o.Warn.Warn("%s: amdrun chooses and leases this node's devices, torch's elastic agent (python -m torch.distributed.run) runs the rendezvous and restarts; each worker is bound as amdrun plans it (amdrun's bind shim picks its CPUs by LOCAL_RANK)", what)
	return true
}
