package runcmd

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/internal/launch"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// torchrun's command line, as torch/distributed/run.py declares it in
// torch 1.13 (underscore spellings only) and in the current release
// (hyphenated spellings with underscore aliases, plus --local-addr,
// --local-ranks-filter, --logs-specs, --event-log-handler,
// --numa-binding, --signals-to-handle, --shutdown-timeout,
// --virtual-local-rank and --duplicate-std{out,err}-filters). amdrun
// takes every one of them, in either spelling: normalizeFlag turns "_"
// into "-", and torchrun's PET_* variables are read as torchrun reads
// them (applyPET).

// normalizeFlag makes --nproc_per_node the same flag as
// --nproc-per-node, as torchrun accepts both.
func normalizeFlag(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
}

// petFlags are the flags torchrun also reads from the environment:
// PET_<NAME> (its argparse actions env and check_env, keyed by the
// flag's underscore name). A flag given on the command line wins.
// --logs-specs and --numa-binding have no variable in torchrun either.
var petFlags = []string{
	"nnodes", "nproc-per-node", "rdzv-backend", "rdzv-endpoint", "rdzv-id", "rdzv-conf", "standalone",
	"max-restarts", "monitor-interval", "start-method", "event-log-handler", "role", "module", "no-python",
	"run-path", "log-dir", "redirects", "tee", "local-ranks-filter", "duplicate-stdout-filters",
	"duplicate-stderr-filters", "node-rank", "master-addr", "master-port", "local-addr",
	"signals-to-handle", "shutdown-timeout", "virtual-local-rank",
}

// petName is the variable torchrun reads for flag name.
func petName(name string) string {
	return "PET_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// applyPET sets every flag of petFlags that the command line left alone
// from its PET_* variable in env (the last assignment wins). A boolean
// flag's variable is a number, true when not 0, as torchrun's check_env
// reads it. It records which flags came from the environment in from,
// so that errors name the variable.
func applyPET(fl *pflag.FlagSet, env []string, from map[string]string) error {
	for _, name := range petFlags {
		f := fl.Lookup(name)
		if f == nil || f.Changed {
			continue
		}
		key := petName(name)
		v, ok := launch.LookupEnv(env, key)
		if !ok {
			continue
		}
		if f.Value.Type() == "bool" {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return cmdutil.FlagErrorf("%s=%q: want a number (0 off, 1 on), as torchrun reads it", key, v)
			}
			v = strconv.FormatBool(n != 0)
		}
		if err := fl.Set(name, v); err != nil {
			return cmdutil.FlagErrorf("%s=%q: %v", key, v, err)
		}
		from[name] = key
	}
	return nil
}

// torchrunFlags are the values of torchrun's flags that amdrun keeps as
// given until validation.
type torchrunFlags struct {
	nproc                                  string
	standalone                             bool
	monitorInterval                        string
	startMethod, eventLogHandler, localAdr string
	logsSpecs, numaBinding, signals        string
	shutdownTimeout                        int
	runPath, virtualLocalRank              bool
	redirects, tee                         string
	dupOut, dupErr                         string
}

// addTorchrunFlags declares torchrun's flags that amdrun's own set does
// not already have (--nproc-per-node, --nnodes, --node-rank,
// --master-addr, --master-port, --max-restarts, --module, --no-python,
// --log-dir, --local-ranks-filter and --rdzv-* are declared with the
// rest).
func addTorchrunFlags(fl *pflag.FlagSet, o *Options, t *torchrunFlags) {
	fl.BoolVar(&t.standalone, "standalone", false, "one node, rendezvous on a free local port (amdrun's default; as torchrun)")
	fl.StringVar(&o.Role, "role", "", "ROLE_NAME of the ranks (default \"default\")")
	fl.BoolVar(&t.virtualLocalRank, "virtual-local-rank", false, "every rank sees only its own devices and gets LOCAL_RANK=0")
	fl.BoolVar(&t.runPath, "run-path", false, "run SCRIPT with the Python interpreter even with --no-python (as torchrun's runpy.run_path)")
	fl.StringVarP(&t.redirects, "redirects", "r", "", "streams of each rank written only to --log-dir: 0 none, 1 stdout, 2 stderr, 3 both, or per local rank, e.g. 0:3,1:0")
	fl.StringVarP(&t.tee, "tee", "t", "", "streams of each rank written to --log-dir and the console (values as --redirects)")
	fl.IntVar(&t.shutdownTimeout, "shutdown-timeout", 0, "seconds between SIGTERM and SIGKILL (torchrun's name for --grace)")
	fl.StringVar(&t.numaBinding, "numa-binding", "", "torchrun's binding: node (= --bind numa) or exclusive (= --bind exclusive)")
	fl.StringVar(&t.signals, "signals-to-handle", "", "signals forwarded to the ranks, e.g. SIGTERM,SIGINT,SIGUSR1 (default SIGINT,SIGTERM,SIGHUP,SIGQUIT,SIGUSR1,SIGUSR2); INT, TERM, HUP and QUIT also stop the job")
	fl.StringVar(&t.monitorInterval, "monitor-interval", "", "accepted for torchrun: amdrun sees a rank exit at once, there is nothing to poll")
	fl.StringVar(&t.startMethod, "start-method", "", "accepted for torchrun (spawn, fork or forkserver): ranks are programs, started the same way under each")
	fl.StringVar(&t.eventLogHandler, "event-log-handler", "", "passed to torch's agent when it runs the job (amdrun records no torchelastic events)")
	fl.StringVar(&t.localAdr, "local-addr", "", "passed to torch's agent when it runs the job (its rendezvous address of this node)")
	fl.StringVar(&t.logsSpecs, "logs-specs", "", "passed to torch's agent when it runs the job (a torchrun.logs_specs entry point)")
	fl.StringVar(&t.dupOut, "duplicate-stdout-filters", "", "passed to torch's agent when it runs the job")
	fl.StringVar(&t.dupErr, "duplicate-stderr-filters", "", "passed to torch's agent when it runs the job")
}

// noEffect says why a torchrun option that only torch's agent uses
// changes nothing when amdrun starts the ranks itself.
var noEffect = map[string]string{
	"local-addr":               "it is the address torchrun's rendezvous publishes for this node; amdrun's ranks meet at --master-addr",
	"logs-specs":               "it names a Python plugin of torchrun's; --log-dir keeps torchrun's default layout",
	"duplicate-stdout-filters": "amdrun does not copy matching lines to another file; every line is in the ranks' stdout.log under --log-dir",
	"duplicate-stderr-filters": "amdrun does not copy matching lines to another file; every line is in the ranks' stderr.log under --log-dir",
}

// validateTorchrun turns torchrun's flags into Options: each has
// torchrun's meaning where amdrun has one and a one-line error where it
// cannot honour it. label names a flag as the user gave it (the flag, or
// the PET_* variable it came from).
func validateTorchrun(cmd *cobra.Command, o *Options, t *torchrunFlags, label func(string) string) error {
	changed := cmd.Flags().Changed
	if err := parseNProc(cmd, o, t.nproc, label); err != nil {
		return err
	}
	if t.runPath && o.Module {
		return cmdutil.FlagErrorf("%s and %s cannot be used together", label("run-path"), label("module"))
	}
	if t.runPath {
		o.NoPython = false // torchrun: --run-path takes precedence over --no-python
	}
	o.VirtualLocalRank = t.virtualLocalRank
	var err error
	if o.Redirects, err = launch.ParseStreams(t.redirects); err != nil {
		return cmdutil.FlagErrorf("%s: %v", label("redirects"), err)
	}
	if o.Tee, err = launch.ParseStreams(t.tee); err != nil {
		return cmdutil.FlagErrorf("%s: %v", label("tee"), err)
	}
	if changed("monitor-interval") {
		if v, err := strconv.ParseFloat(t.monitorInterval, 64); err != nil || v < 0 || math.IsInf(v, 0) {
			return cmdutil.FlagErrorf("%s: want a number of seconds, got %q", label("monitor-interval"), t.monitorInterval)
		}
	}
	if changed("start-method") && !slices.Contains([]string{"spawn", "fork", "forkserver"}, t.startMethod) {
		return cmdutil.FlagErrorf("%s: want spawn, fork or forkserver, got %q", label("start-method"), t.startMethod)
	}
	if changed("shutdown-timeout") {
		if changed("grace") {
			return cmdutil.FlagErrorf("%s and --grace say the same thing: give one", label("shutdown-timeout"))
		}
		if t.shutdownTimeout < 0 {
			return cmdutil.FlagErrorf("%s must not be negative, got %d", label("shutdown-timeout"), t.shutdownTimeout)
		}
		o.Grace = time.Duration(t.shutdownTimeout) * time.Second
	}
	if err := torchrunEnv(o, changed); err != nil {
		return err
	}
	if changed("numa-binding") {
		var b launch.BindMode
		switch t.numaBinding {
		case "node":
			b = launch.BindNUMA
		case "exclusive":
			b = launch.BindExclusive
		case "socket", "core-complex":
			return cmdutil.FlagErrorf("%s %s is not supported: amdrun binds to NUMA nodes (node, exclusive; or --bind)", label("numa-binding"), t.numaBinding)
		default:
			return cmdutil.FlagErrorf("%s: want node, socket, exclusive or core-complex, got %q", label("numa-binding"), t.numaBinding)
		}
		if changed("bind") && o.Bind != b {
			return cmdutil.FlagErrorf("%s %s and --bind %s disagree: give one", label("numa-binding"), t.numaBinding, o.Bind)
		}
		o.Bind = b
	}
	if changed("signals-to-handle") {
		sigs, err := launch.ParseSignals(t.signals)
		if err != nil {
			return cmdutil.FlagErrorf("%s: %v", label("signals-to-handle"), err)
		}
		o.Forward = sigs
	}
	if o.Launcher == "torchrun" {
		return nil
	}
	// --launcher amdrun from here: amdrun's own meaning, or a note that
	// the option changes nothing (never a refusal: torchrun runs the line).
	for _, name := range []string{"local-addr", "logs-specs", "duplicate-stdout-filters", "duplicate-stderr-filters"} {
		if changed(name) {
			o.Warn.Warn("%s does nothing under amdrun: %s", label(name), noEffect[name])
		}
	}
	if changed("event-log-handler") && t.eventLogHandler != "null" {
		o.Warn.Warn("%s %s does nothing under amdrun: it records no torchelastic events", label("event-log-handler"), t.eventLogHandler)
	}
	return nil
}

// parseNProc reads --nproc-per-node (a number of ranks, or gpu, auto,
// cpu) together with --ngpus (a number of devices).
func parseNProc(cmd *cobra.Command, o *Options, v string, label func(string) string) error {
	ngpusGiven := cmd.Flags().Changed("ngpus")
	switch v = strings.TrimSpace(v); v {
	case "":
		return nil
	case "gpu", "auto":
		o.NProcKind = v
		return nil
	case "cpu":
		if ngpusGiven && o.NGPUs > 0 {
			return cmdutil.FlagErrorf("%s cpu runs ranks without GPUs: it cannot be used with --ngpus %d", label("nproc-per-node"), o.NGPUs)
		}
		o.NProcKind, o.CPUOnly = v, true
		return nil
	case "xpu":
		return cmdutil.FlagErrorf("%s xpu: amdrun runs on AMD and NVIDIA GPUs, not Intel XPUs", label("nproc-per-node"))
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return cmdutil.FlagErrorf("%s: want a number of ranks (at least 1), gpu, auto or cpu, got %q", label("nproc-per-node"), v)
	}
	if most, why := launch.RankLimit(); n > most {
		return cmdutil.FlagErrorf("%s %d: more ranks than this node can run: at most %d (%s)", label("nproc-per-node"), n, most, why)
	}
	o.NProc = n
	switch {
	case !ngpusGiven:
		o.NGPUs = n
	case o.NGPUs == 0:
		o.CPUOnly = true // --ngpus 0 --nproc-per-node N: N CPU ranks
	case o.NGPUs%n != 0:
		return cmdutil.FlagErrorf("--ngpus %d does not split over %s %d ranks: each rank gets ngpus/nproc devices", o.NGPUs, label("nproc-per-node"), n)
	}
	return nil
}

// torchrunArgs are the flags passed on to torchrun with --launcher
// torchrun, in the underscore spelling that every torchrun from torch
// 1.13 to the current release accepts, for those the user gave. Flags
// torchrun has only in newer releases are passed as well: an older
// torchrun says it does not know them.
func torchrunArgs(cmd *cobra.Command, o *Options, t *torchrunFlags) []string {
	fl := cmd.Flags()
	var out []string
	for _, name := range []string{"role", "monitor-interval", "start-method", "event-log-handler", "log-dir",
		"redirects", "tee", "local-ranks-filter", "local-addr", "logs-specs", "numa-binding",
		"signals-to-handle", "shutdown-timeout", "duplicate-stdout-filters", "duplicate-stderr-filters"} {
		if f := fl.Lookup(name); f.Changed {
			out = append(out, "--"+strings.ReplaceAll(name, "-", "_"), f.Value.String())
		}
	}
	if t.runPath {
		out = append(out, "--run_path")
	}
	if t.virtualLocalRank {
		out = append(out, "--virtual_local_rank")
	}
	return out
}

// torchrunEnv reads the variables torch's agent reads besides PET_*:
// TORCH_ELASTIC_SHUTDOWN_TIMEOUT, the grace in seconds when neither
// --shutdown-timeout nor --grace is given, and
// TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE, the ranks' console prefix.
func torchrunEnv(o *Options, changed func(string) bool) error {
	env := o.Env()
	if v, ok := launch.LookupEnv(env, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"); ok && !changed("shutdown-timeout") && !changed("grace") {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return cmdutil.FlagErrorf("TORCH_ELASTIC_SHUTDOWN_TIMEOUT=%q: want a whole number of seconds, as torchrun reads it", v)
		}
		o.Grace = time.Duration(n) * time.Second
	}
	if v, ok := launch.LookupEnv(env, "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"); ok && v != "" {
		o.PrefixTemplate = v
	}
	return nil
}

// TorchrunMasterPort is torchrun's --master-port default, which every
// node of a static multi-node job then agrees on.
const TorchrunMasterPort = 29500

// multiNodeDefaults gives a static multi-node job torchrun's defaults
// where the flags leave them out: --master-port 29500 (one node keeps a
// free port, so that two jobs there cannot collide) and --master-addr
// 127.0.0.1, which only works when every node runs on this machine, and
// a warning says so.
func multiNodeDefaults(o *Options, changed func(string) bool) {
	if o.NNodes <= 1 || o.Launcher != "amdrun" {
		return
	}
	if o.MasterPort == 0 {
		o.MasterPort = TorchrunMasterPort
	}
	if o.Slurm == nil && !changed("master-addr") {
		o.Warn.Warn("--nnodes %d without --master-addr: the nodes meet at %s:%d, as with torchrun, so every node must run on this machine", o.NNodes, o.MasterAddr, o.MasterPort)
	}
}

// rdzvTimeouts are the --rdzv-conf keys of torch's rendezvous handlers
// that are timeouts in whole seconds (RendezvousParameters.get_as_int).
var rdzvTimeouts = []string{"join_timeout", "read_timeout", "last_call_timeout", "close_timeout", "timeout"}

// ParseRdzvConf reads --rdzv-conf as torchrun's _parse_rendezvous_config
// does: KEY=VALUE pairs separated by commas, spaces around each trimmed,
// the last of a key winning; an empty key or value is an error, and so
// is a timeout key whose value is not a whole number of seconds.
func ParseRdzvConf(s string) (map[string]string, []string, error) {
	conf := map[string]string{}
	var keys []string
	if strings.TrimSpace(s) == "" {
		return conf, nil, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if k == "" {
			return nil, nil, fmt.Errorf("want KEY=VALUE,...,KEY=VALUE, got %q", s)
		}
		if v == "" {
			return nil, nil, fmt.Errorf("%s has no value", k)
		}
		if slices.Contains(rdzvTimeouts, k) {
			if n, err := strconv.Atoi(v); err != nil || n <= 0 {
				return nil, nil, fmt.Errorf("%s=%s: want a whole number of seconds", k, v)
			}
		}
		if _, seen := conf[k]; !seen {
			keys = append(keys, k)
		}
		conf[k] = v
	}
	return conf, keys, nil
}

// rdzvConfOneNode reads --rdzv-conf for a job amdrun runs itself on one
// node and says, in one line, what its keys do there: the timeouts bound
// waits for other nodes, which one node does not have (amdrun starts its
// ranks together, so they hold at once); any other key configures a
// rendezvous backend amdrun does not run.
func rdzvConfOneNode(o *Options, label, conf string) error {
	_, keys, err := ParseRdzvConf(conf)
	if err != nil {
		return cmdutil.FlagErrorf("%s: %v", label, err)
	}
	var met, none []string
	for _, k := range keys {
		if slices.Contains(rdzvTimeouts, k) {
			met = append(met, k)
		} else {
			none = append(none, k)
		}
	}
	var parts []string
	if len(met) > 0 {
		parts = append(parts, strings.Join(met, ", ")+" hold at once (one node: amdrun starts its ranks together, no node waits for another)")
	}
	if len(none) > 0 {
		parts = append(parts, strings.Join(none, ", ")+" do nothing (amdrun runs no rendezvous backend on one node)")
	}
	if len(parts) > 0 {
		o.Warn.Warn("%s: %s", label, strings.Join(parts, "; "))
	}
	return nil
}
