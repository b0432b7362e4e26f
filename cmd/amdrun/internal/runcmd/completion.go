package runcmd

import (
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/spf13/cobra"
)

// flagValues are the values shell completion offers for the launcher's
// flags that take one of a few words.
var flagValues = map[string][]string{
	"policy":         selector.PolicyNames,
	"order":          {"index", "links"},
	"bind":           {"numa", "exclusive", "none"},
	"mem-policy":     {"bind", "preferred", "none"},
	"launcher":       {"amdrun", "torchrun"},
	"numa-balancing": {"off", "on", "keep"},
	"nproc-per-node": {"gpu", "auto", "cpu"},
	"start-method":   {"spawn", "fork", "forkserver"},
	"numa-binding":   {"node", "exclusive"},
	"rdzv-backend":   {"static", "c10d"},
	"redirects":      {"0", "1", "2", "3"},
	"tee":            {"0", "1", "2", "3"},
}

// registerCompletions makes `amdrun completion SHELL` scripts complete
// the values of flagValues.
func registerCompletions(cmd *cobra.Command) {
	for name, vals := range flagValues {
		RegisterValues(cmd, name, vals)
	}
}

// RegisterValues makes shell completion offer vals for cmd's flag name
// (and nothing else: no file names).
func RegisterValues(cmd *cobra.Command, name string, vals []string) {
	vals = append([]string(nil), vals...)
	// The flag is defined on cmd; an error would be a typo in the name.
	_ = cmd.RegisterFlagCompletionFunc(name, func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return vals, cobra.ShellCompDirectiveNoFileComp
	})
}
