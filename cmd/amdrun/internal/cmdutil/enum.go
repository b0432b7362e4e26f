package cmdutil

import (
	"errors"
	"fmt"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
	"github.com/spf13/cobra"
)

// Word is a word an Enum flag takes and what it means ("": it says it).
type Word struct {
	Name, Help string
}

// Enum is a flag that takes one of a few words: its help, completion and
// error for any other word come from it (as cli/cli's StringEnumFlag).
type Enum struct {
	// Name is the flag without "--".
	Name  string
	Words []Word
	// Also names what else the flag takes ("a number of ranks"), for its
	// error and the docs' table of words; "": only the words.
	Also string
}

// AlsoAnnotation is the pflag annotation key of a completed flag's Enum.Also.
const AlsoAnnotation = "amdrun_also"

// Words are names as Words without help.
func Words(names ...string) []Word {
	out := make([]Word, len(names))
	for i, n := range names {
		out[i].Name = n
	}
	return out
}

// Values are the enum's words.
func (e *Enum) Values() []string {
	out := make([]string, len(e.Words))
	for i, w := range e.Words {
		out[i] = w.Name
	}
	return out
}

// Err is the error for a word the flag does not take:
// `--policy: want tree or ring, got "x"`, a usage error.
func (e *Enum) Err(got string) error { return FlagErrorf("--%s: %v", e.Name, e.want(got)) }

func (e *Enum) want(got string) error {
	want := e.Values()
	if e.Also != "" {
		want = append([]string{e.Also}, want...)
	}
	return fmt.Errorf("want %s, got %q", JoinOr(want), got)
}

// help lists the words for the flag's help: "numa (meaning), exclusive or none".
func (e *Enum) help() string {
	parts := make([]string, len(e.Words))
	for i, w := range e.Words {
		parts[i] = w.Name
		if w.Help != "" {
			parts[i] += " (" + w.Help + ")"
		}
	}
	return JoinOr(parts)
}

// EnumVar declares the flag e on cmd, default def, bound to p through
// parse, the owning package's parser of its words: a word parse refuses
// is a flag error worded by e.
func EnumVar[T any](cmd *cobra.Command, p *T, e *Enum, def string, parse func(string) (T, error), usage string) {
	v := Parsed(p, func(s string) (T, error) {
		t, err := parse(s)
		if err != nil {
			return t, e.want(s)
		}
		return t, nil
	})
	if err := v.Set(def); err != nil {
		panic(fmt.Sprintf("--%s: default %q: %v", e.Name, def, err)) // a typo in a declaration
	}
	cmd.Flags().Var(v, e.Name, fmt.Sprintf(usage, e.help()))
	Complete(cmd, e)
}

// ParsedValue is a pflag.Value that parse reads into the setting it is
// bound to; its text is kept as given (for help, and for torchrun). A
// parse error lacks the flag's name: ValueError adds it.
type ParsedValue[T any] struct {
	p     *T
	text  string
	parse func(string) (T, error)
}

// Parsed is the ParsedValue bound to p; *p keeps its value until set.
func Parsed[T any](p *T, parse func(string) (T, error)) *ParsedValue[T] {
	return &ParsedValue[T]{p: p, parse: parse}
}

func (v *ParsedValue[T]) String() string { return v.text }
func (v *ParsedValue[T]) Type() string   { return "string" }

func (v *ParsedValue[T]) Set(s string) error {
	t, err := v.parse(s)
	if err != nil {
		return err
	}
	*v.p, v.text = t, s
	return nil
}

// IndexList parses a list of device or rank indices, "0,2,4-7".
func IndexList(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("empty device list")
	}
	l, err := topology.ParseCPUList(s)
	if err != nil {
		return nil, fmt.Errorf("want indices like 0,2,4-7, got %q", s)
	}
	return l, nil
}

// PersistentStringEnumFlag declares e on cmd and its subcommands, usage's
// %s the words; the caller checks the value (e.Err is the error).
func PersistentStringEnumFlag(cmd *cobra.Command, p *string, e *Enum, def, usage string) {
	cmd.PersistentFlags().StringVar(p, e.Name, def, fmt.Sprintf(usage, e.help()))
	Complete(cmd, e)
}

// Complete makes shell completion offer e's words for cmd's flag e.Name
// (and nothing else: no file names), and annotates the flag with e.Also.
func Complete(cmd *cobra.Command, e *Enum) {
	vals := e.Values()
	_ = cmd.RegisterFlagCompletionFunc(e.Name, func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return vals, cobra.ShellCompDirectiveNoFileComp
	})
	if e.Also != "" {
		cmd.Flag(e.Name).Annotations = map[string][]string{AlsoAnnotation: {e.Also}}
	}
}

// JoinOr lists words as a sentence does: "a", "a or b", "a, b or c".
func JoinOr(words []string) string { return join(words, " or ") }

// JoinAnd is words as a list: "a, b and c".
func JoinAnd(words []string) string { return join(words, " and ") }

func join(words []string, last string) string {
	if n := len(words); n > 1 {
		return strings.Join(words[:n-1], ", ") + last + words[n-1]
	}
	return strings.Join(words, "")
}
