package runcmd

import (
	"fmt"
	"strconv"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/selector"
)

// The launcher's flags that take one of a few words (enum_test.go checks
// that every word parses in the package that reads it).
var (
	policyFlag = &cmdutil.Enum{Name: "policy", Words: cmdutil.Words(selector.PolicyNames...)}
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
	memFlag     = &cmdutil.Enum{Name: "mem-policy", Words: cmdutil.Words("bind", "preferred", "none")}
	containFlag = &cmdutil.Enum{Name: "contain", Words: []cmdutil.Word{
		{Name: "auto"}, {Name: "pid-namespace", Help: "needs root"},
		{Name: "user-namespace", Help: "where the kernel permits user namespaces"}, {Name: "subreaper", Help: "see amdrun doctor"},
	}}
	numaBalancingFlag = &cmdutil.Enum{Name: "numa-balancing", Words: cmdutil.Words("off", "on", "keep")}
	onStallFlag       = &cmdutil.Enum{Name: "on-stall", Words: []cmdutil.Word{
		{Name: "report", Help: "and keep waiting"}, {Name: "stop", Help: "exit code 124"}, {Name: "restart", Help: "counts against --max-restarts"},
	}}
	launcherFlag = &cmdutil.Enum{Name: "launcher", Words: []cmdutil.Word{
		{Name: "amdrun"}, {Name: "torchrun", Help: "amdrun chooses devices, then runs torchrun for elastic jobs"},
	}}
	// torchrun's flags that take words (--nproc-per-node a number too).
	nprocFlag = &cmdutil.Enum{Name: "nproc-per-node", Also: "a number of ranks (at least 1)", Words: []cmdutil.Word{
		{Name: "gpu", Help: "one per free device"}, {Name: "auto", Help: "gpu, else one per CPU"}, {Name: "cpu", Help: "one per CPU, no GPU"},
	}}
	startMethodFlag = &cmdutil.Enum{Name: "start-method", Words: cmdutil.Words("spawn", "fork", "forkserver")}
	numaBindingFlag = &cmdutil.Enum{Name: "numa-binding", Words: []cmdutil.Word{
		{Name: "node", Help: "= --bind numa"}, {Name: "socket"}, {Name: "exclusive"}, {Name: "core-complex"},
	}}
)

// completionOnly are the words completion offers for open-ended flags.
var completionOnly = []*cmdutil.Enum{
	{Name: "rdzv-backend", Words: cmdutil.Words("static", "c10d"), Also: "another backend torchrun has, with --launcher torchrun"},
	{Name: "redirects", Words: cmdutil.Words(streamNumbers()...), Also: "a number per local rank, e.g. 0:3,1:0"},
	{Name: "tee", Words: cmdutil.Words(streamNumbers()...), Also: "a number per local rank, as --redirects"},
}

// streamNumbers are the values of -r and -t: "0" ... "3".
func streamNumbers() []string {
	out := make([]string, len(launch.StreamNames))
	for v := range launch.StreamNames {
		out[v] = strconv.Itoa(v)
	}
	return out
}

// streamHelp is "0 (none), 1 (stdout), 2 (stderr) or 3 (both)".
func streamHelp() string {
	parts := make([]string, len(launch.StreamNames))
	for v, n := range launch.StreamNames {
		parts[v] = fmt.Sprintf("%d (%s)", v, n)
	}
	return cmdutil.JoinOr(parts)
}
