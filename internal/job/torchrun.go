package job

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/amdrun/amdrun/internal/envlist"
	"github.com/amdrun/amdrun/internal/plan"
)

// resolveTorchrun reads torchrun's --run-path, --monitor-interval and
// --shutdown-timeout.
func (o *Options) resolveTorchrun(l *CommandLine) error {
	if l.RunPath.On() {
		if o.Module {
			return usageErrorf("%s and %s cannot be used together", l.RunPath.Label(), l.Module.Label())
		}
		o.NoPython = false // torchrun: --run-path takes precedence over --no-python
	}
	if v, err := strconv.ParseFloat(l.MonitorInterval.String(), 64); l.MonitorInterval.Given() && (err != nil || v < 0 || math.IsInf(v, 0)) {
		return usageErrorf("%s: want a number of seconds, got %q", l.MonitorInterval.Label(), l.MonitorInterval.String())
	}
	if l.ShutdownTimeout.Given() {
		if l.Grace.Given() {
			return usageErrorf("%s and --grace say the same thing: give one", l.ShutdownTimeout.Label())
		}
		secs, _ := strconv.Atoi(l.ShutdownTimeout.String()) // an int flag: pflag read it
		if secs < 0 {
			return usageErrorf("%s must not be negative, got %d", l.ShutdownTimeout.Label(), secs)
		}
		o.Grace = time.Duration(secs) * time.Second
	}
	return nil
}

// noteAgentOnly says, one line each, which AgentOnly flags given change
// nothing when amdrun starts the ranks.
func (o *Options) noteAgentOnly(l *CommandLine) error {
	for _, a := range l.args {
		if o.Launcher != "torchrun" && a.torch&(AgentOnly|Quiet) == AgentOnly && a.Given() && a.String() != a.def {
			o.Warn.Warn("%s does nothing under amdrun: %s", a.Label(), a.help)
		}
	}
	return nil
}

// parseNUMABinding reads torchrun's --numa-binding as amdrun's --bind.
func (o *Options) parseNUMABinding(l *CommandLine) error {
	if l.NUMABinding.Given() {
		b := plan.BindMode(l.NUMABinding.String()) // the command checked the word
		if b == "node" {
			b = plan.BindNUMA
		}
		if l.Bind.Given() && o.Bind != b {
			return usageErrorf("%s %s and --bind %s disagree: give one", l.NUMABinding.Label(), l.NUMABinding.String(), o.Bind)
		}
		o.Bind = b
	}
	return nil
}

// torchrunArgs are the Pass flags the user gave, in underscore spelling;
// not NotToAgent ones under the agent (amdrun's shim binds the workers).
func torchrunArgs(l *CommandLine, agent bool) []string {
	var out []string
	for _, a := range l.args {
		switch {
		case !a.Given() || a.torch&Pass == 0 || agent && a.torch&NotToAgent != 0:
		case a.Type() == "bool":
			if a.On() {
				out = append(out, a.torchrunFlag())
			}
		default:
			out = append(out, a.torchrunFlag(), a.String())
		}
	}
	return out
}

// torchrunEnv reads the variables torch's agent reads besides PET_*: the
// grace (unless a flag gives it) and the console prefix.
func (o *Options) torchrunEnv(l *CommandLine) error {
	env := o.Env()
	if v, ok := envlist.Lookup(env, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"); ok && !l.ShutdownTimeout.Given() && !l.Grace.Given() {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return usageErrorf("TORCH_ELASTIC_SHUTDOWN_TIMEOUT: want a whole number of seconds (as torchrun reads it), got %q", v)
		}
		o.Grace = time.Duration(n) * time.Second
	}
	if v, ok := envlist.Lookup(env, "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"); ok && v != "" {
		o.PrefixTemplate = v
	}
	return nil
}

// rdzvTimeouts are the --rdzv-conf keys of torch's rendezvous handlers
// that are timeouts in whole seconds (RendezvousParameters.get_as_int).
var rdzvTimeouts = []string{"join_timeout", "read_timeout", "last_call_timeout", "close_timeout", "timeout"}

// rdzvConfKeys reads --rdzv-conf as torchrun's _parse_rendezvous_config
// and returns its keys, each once; an empty key or value is an error, as
// is a timeout that is not a whole number of seconds.
func rdzvConfKeys(s string) ([]string, error) {
	var keys []string
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if k == "" {
			return nil, fmt.Errorf("want KEY=VALUE,...,KEY=VALUE, got %q", s)
		}
		if v == "" {
			return nil, fmt.Errorf("%s has no value", k)
		}
		if slices.Contains(rdzvTimeouts, k) {
			if n, err := strconv.Atoi(v); err != nil || n <= 0 {
				return nil, fmt.Errorf("%s=%s: want a whole number of seconds", k, v)
			}
		}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// rdzvConfOneNode says, in one line, what --rdzv-conf's keys do for a
// job amdrun runs itself on one node.
func (o *Options) rdzvConfOneNode(label, conf string) error {
	keys, err := rdzvConfKeys(conf)
	if err != nil {
		return usageErrorf("%s: %v", label, err)
	}
	timeout := func(k string) bool { return slices.Contains(rdzvTimeouts, k) }
	met := slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return !timeout(k) })
	none := slices.DeleteFunc(keys, timeout)
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
