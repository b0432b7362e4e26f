package runcmd

import (
	"slices"
	"strings"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// torchrunNames are the long options of torchrun (torch/distributed/run.py
// of the current release), hyphenated: an abbreviation that could be
// one of them or one of amdrun's own flags means torchrun's, as the line
// was written for torchrun.
var torchrunNames = append([]string{"logs-specs", "numa-binding"}, petFlags...)

// ExpandAbbrev rewrites each unambiguous prefix of a long flag of cmd
// (its own and persistent flags, before SCRIPT or "--") into the flag's
// full name, as torchrun's argparse accepts abbreviations
// (--nproc_per_nod 2 is --nproc-per-node 2). A prefix of several flags
// is an error naming them, unless exactly one of them is torchrun's. A
// name that is no flag's prefix is left for cobra to refuse. It stops at
// the first argument that is not a flag (SCRIPT, or a subcommand).
func ExpandAbbrev(cmd *cobra.Command, args []string) ([]string, error) {
	cmd.InitDefaultHelpFlag()
	cmd.InitDefaultVersionFlag()
	var names []string
	byName := map[string]*pflag.Flag{}
	add := func(f *pflag.Flag) {
		if _, ok := byName[f.Name]; !ok {
			names = append(names, f.Name)
			byName[f.Name] = f
		}
	}
	cmd.Flags().VisitAll(add)
	cmd.PersistentFlags().VisitAll(add)
	short := func(c byte) *pflag.Flag {
		for _, f := range byName {
			if f.Shorthand == string(c) {
				return f
			}
		}
		return nil
	}
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if a == "--" || a == "-" || !strings.HasPrefix(a, "-") {
			break
		}
		if !strings.HasPrefix(a, "--") {
			// -n 4, -mr3: a shorthand that takes a value takes the rest of
			// the argument, or the next one.
			for j := 1; j < len(a); j++ {
				f := short(a[j])
				if f == nil {
					break
				}
				if f.NoOptDefVal == "" {
					if j == len(a)-1 {
						i++
					}
					break
				}
			}
			continue
		}
		name, _, hasValue := strings.Cut(a[2:], "=")
		norm := strings.ReplaceAll(name, "_", "-")
		f, ok := byName[norm]
		if !ok {
			full, err := matchPrefix(names, norm, name)
			if err != nil {
				return nil, err
			}
			if full == "" {
				continue // not a flag: cobra says so
			}
			f = byName[full]
			out[i] = "--" + full + a[2+len(name):]
		}
		if !hasValue && f.NoOptDefVal == "" {
			i++ // the flag's value
		}
	}
	return out, nil
}

// matchPrefix is the one flag of names that norm (a hyphenated name) is
// a prefix of, "" for none; given is the name as written, for the error.
func matchPrefix(names []string, norm, given string) (string, error) {
	if norm == "" {
		return "", nil
	}
	var cands []string
	for _, n := range names {
		if strings.HasPrefix(n, norm) {
			cands = append(cands, n)
		}
	}
	if len(cands) > 1 {
		var tr []string
		for _, c := range cands {
			if slices.Contains(torchrunNames, c) {
				tr = append(tr, c)
			}
		}
		if len(tr) == 1 {
			return tr[0], nil
		}
		slices.Sort(cands)
		return "", cmdutil.FlagErrorf("ambiguous option: --%s could match --%s", given, strings.Join(cands, ", --"))
	}
	if len(cands) == 0 {
		return "", nil
	}
	return cands[0], nil
}
