package job

import (
	"slices"
	"strings"
)

// Flag is a command's flag as ExpandAbbrev sees it.
type Flag struct {
	// Name is the long name, Shorthand the one-letter name or "".
	Name, Shorthand string
	// Bare says the flag takes no value after it (a boolean, --wait).
	Bare bool
	// Torchrun says the flag is torchrun's: an ambiguous abbreviation
	// means it.
	Torchrun bool
}

// ExpandAbbrev rewrites each unambiguous prefix of a long flag of flags
// into its full name, as torchrun's argparse accepts abbreviations, up to
// the first argument that is not a flag. A prefix of several flags is a
// *UsageError naming them, unless exactly one is torchrun's; a name that
// is no flag's prefix is left for the command to refuse.
func ExpandAbbrev(flags []Flag, args []string) ([]string, error) {
	byName := map[string]Flag{}
	for _, f := range flags {
		if _, ok := byName[f.Name]; !ok {
			byName[f.Name] = f
		}
	}
	short := func(c byte) (Flag, bool) {
		for _, f := range byName {
			if f.Shorthand == string(c) {
				return f, true
			}
		}
		return Flag{}, false
	}
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if a == "--" || a == "-" || !strings.HasPrefix(a, "-") {
			break
		}
		if !strings.HasPrefix(a, "--") {
			// -n 4, -mr3: a shorthand's value is the rest or the next.
			for j := 1; j < len(a); j++ {
				f, ok := short(a[j])
				if !ok {
					break
				}
				if !f.Bare {
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
			full, err := matchPrefix(byName, norm, name)
			if err != nil {
				return nil, err
			}
			if full == "" {
				continue // not a flag: the command says so
			}
			f = byName[full]
			out[i] = "--" + full + a[2+len(name):]
		}
		if !hasValue && !f.Bare {
			i++ // the flag's value
		}
	}
	return out, nil
}

// matchPrefix is the one flag of byName that norm is a prefix of, "" for
// none; given is the name as written, for the error.
func matchPrefix(byName map[string]Flag, norm, given string) (string, error) {
	var cands, tr []string
	for n, f := range byName {
		if norm != "" && strings.HasPrefix(n, norm) {
			cands = append(cands, n)
			if f.Torchrun {
				tr = append(tr, n)
			}
		}
	}
	switch {
	case len(cands) <= 1:
		return strings.Join(cands, ""), nil
	case len(tr) == 1:
		return tr[0], nil
	}
	slices.Sort(cands)
	return "", usageErrorf("ambiguous option: --%s could match --%s", given, strings.Join(cands, ", --"))
}
