package runcmd

import (
	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/spf13/cobra"
)

// The launcher's flags that take one of a few words, each declared once:
// help, completion and the error for another word come from here
// (enum_test.go checks that every word parses in the package that reads
// it).
var (
	policyFlag = &cmdutil.Enum{Name: "policy", Words: words(selector.PolicyNames...)}
	orderFlag  = &cmdutil.Enum{Name: "order", Words: []cmdutil.Word{
		{Name: selector.OrderIndex.String(), Help: "ascending device index"},
		{Name: selector.OrderLinks.String(), Help: "consecutive ranks share the fastest links"},
	}}
	bindFlag = &cmdutil.Enum{Name: "bind", Words: []cmdutil.Word{
		{Name: "numa", Help: "the device's NUMA node"},
		{Name: "exclusive", Help: "a share of the node's CPUs per rank, leased"},
		{Name: "socket", Help: "every NUMA node of the device's socket"},
		{Name: "core-complex", Help: "one L3 cache's CPUs per rank, leased"},
		{Name: "none"},
	}}
	memFlag     = &cmdutil.Enum{Name: "mem-policy", Words: words("bind", "preferred", "none")}
	containFlag = &cmdutil.Enum{Name: "contain", Words: []cmdutil.Word{
		{Name: "auto"}, {Name: "pid-namespace", Help: "needs root"},
		{Name: "user-namespace", Help: "where the kernel permits user namespaces"}, {Name: "subreaper", Help: "see amdrun doctor"},
	}}
	numaBalancingFlag = &cmdutil.Enum{Name: "numa-balancing", Words: words("off", "on", "keep")}
	launcherFlag      = &cmdutil.Enum{Name: "launcher", Words: []cmdutil.Word{
		{Name: "amdrun"}, {Name: "torchrun", Help: "amdrun chooses devices, then runs torchrun for elastic jobs"},
	}}
)

// enums are the enum flags by name, for job's WordErrors.
var enums = byName(policyFlag, orderFlag, bindFlag, memFlag, containFlag, numaBalancingFlag, launcherFlag)

func byName(es ...*cmdutil.Enum) map[string]*cmdutil.Enum {
	m := map[string]*cmdutil.Enum{}
	for _, e := range es {
		m[e.Name] = e
	}
	return m
}

// completionOnly are the words completion offers for flags that take
// other values too (a number of ranks, a stream list) or that torchrun.go
// checks itself.
var completionOnly = map[string][]string{
	"nproc-per-node": {"gpu", "auto", "cpu"},
	"start-method":   {"spawn", "fork", "forkserver"},
	"numa-binding":   {"node", "socket", "exclusive", "core-complex"},
	"rdzv-backend":   {"static", "c10d"},
	"redirects":      {"0", "1", "2", "3"},
	"tee":            {"0", "1", "2", "3"},
}

func words(names ...string) []cmdutil.Word {
	out := make([]cmdutil.Word, len(names))
	for i, n := range names {
		out[i] = cmdutil.Word{Name: n}
	}
	return out
}

// registerCompletions makes `amdrun completion SHELL` scripts complete
// the words of completionOnly (StringEnumFlag registered the enums').
func registerCompletions(cmd *cobra.Command) {
	for name, vals := range completionOnly {
		cmdutil.RegisterValues(cmd, name, vals)
	}
}
