package cmdutil

import (
	"errors"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// wants is what a flag of each pflag type takes, as its error says it.
var wants = map[string]string{"int": "a whole number", "duration": "a duration such as 30s or 10m", "bool": "true or false"}

// ValueError words pflag's err for a value its flag cannot parse as a
// FlagError, `--ngpus: want a whole number, got "abc"`, label naming the
// flag as given (a PET_* variable, say; "": "--" + its name). Any other
// error is returned as it is.
func ValueError(label string, err error) error {
	var ive *pflag.InvalidValueError
	if !errors.As(err, &ive) {
		return err
	}
	if label == "" {
		label = "--" + ive.GetFlag().Name
	}
	w := wants[ive.GetFlag().Value.Type()]
	if w == "" {
		return FlagErrorf("%s: %v", label, errors.Unwrap(ive))
	}
	return FlagErrorf("%s: want %s, got %q", label, w, ive.GetValue())
}

// FlagParseError is cobra's flag parsing error of c as amdrun reports it,
// a FlagError: a value worded by ValueError, an unknown flag with the
// nearest flag suggested (`unknown flag: --ngpux; did you mean --ngpus?`).
func FlagParseError(c *cobra.Command, err error) error {
	var ne *pflag.NotExistError
	if errors.As(err, &ne) && ne.GetSpecifiedShortnames() == "" {
		if near := nearestFlag(c, ne.GetSpecifiedName()); near != "" {
			return FlagErrorf("%v; did you mean --%s?", err, near)
		}
	}
	if ve := ValueError("", err); ve != err {
		return ve
	}
	return &FlagError{Err: err}
}

// nearestFlag is the name of c's flag closest to name as c normalizes it,
// within edit distance 2 (cobra's for commands), "" when none is.
func nearestFlag(c *cobra.Command, name string) string {
	best, bestD := "", 3
	fs := c.Flags()
	name = string(fs.GetNormalizeFunc()(fs, strings.ToLower(name)))
	fs.VisitAll(func(f *pflag.Flag) { // amdrun hides none
		if d := editDistance(name, f.Name); d < bestD {
			best, bestD = f.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Suggest is cobra's "did you mean" for a subcommand of c: `unknown
// command "tpo"; did you mean "amdrun topo"?`, else nil.
func Suggest(c *cobra.Command, name string) error {
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // as cobra's own unknown-command error
	}
	s := c.SuggestionsFor(name)
	if len(s) == 0 {
		return nil
	}
	// cobra lists them in command order: name the nearest (tpo: topo, not ps).
	best := slices.MinFunc(s, func(a, b string) int {
		return editDistance(strings.ToLower(name), a) - editDistance(strings.ToLower(name), b)
	})
	return FlagErrorf("unknown command %q; did you mean %q?", name, c.CommandPath()+" "+best)
}
