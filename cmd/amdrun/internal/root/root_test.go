package root

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdtest"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/iostreams"
	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/amdrun/amdrun/internal/topology"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// testFactory returns a Factory whose discovery gives the bundled example
// (or fails the test when probe is false), with env and test streams.
func testFactory(t *testing.T, probe bool, env ...string) (*cmdutil.Factory, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	ios, _, out, errOut := cmdtest.Streams()
	f := &cmdutil.Factory{
		IOStreams: ios,
		Version:   "1.2.3",
		Env:       func() []string { return env },
		Run: func(ctx context.Context, name string, args ...string) ([]byte, error) {
			return nil, errors.New("fake runner: no programs in tests")
		},
		Discover: func(ctx context.Context, o discover.Options) (*topology.Model, error) {
			if !probe {
				t.Error("discovery ran, but this command must not probe hardware")
				return nil, errors.New("no discovery")
			}
			return discover.Example()
		},
		HostNUMA:   func() ([]topology.NUMANode, error) { return []topology.NUMANode{{ID: 0, CPUs: []int{0}}}, nil },
		Warn:       func(format string, args ...any) {},
		Executable: func() (string, error) { return "/fake/amdrun", nil },
	}
	return f, out, errOut
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		code   int
		stderr string
	}{
		{"success", nil, 0, ""},
		{
			"flag error", cmdutil.FlagErrorf("--ngpus must be at least 1, got 0"), 2,
			"amdrun: --ngpus must be at least 1, got 0\nRun 'amdrun --help' for usage.\n",
		},
		{
			"wrapped flag error", fmt.Errorf("run: %w", cmdutil.FlagErrorf("--policy: bad")), 2,
			"amdrun: run: --policy: bad\nRun 'amdrun --help' for usage.\n",
		},
		{"rank exit code", &cmdutil.ExitCodeError{Code: 3}, 3, ""},
		{"rank killed by SIGTERM", fmt.Errorf("launch: %w", &cmdutil.ExitCodeError{Code: 143}), 143, ""},
		{"silent error", cmdutil.ErrSilent, 1, ""},
		{
			"generic error keeps one line", errors.New("rocm-smi: 8 devices requested, 6 available\nsecond line"), 1,
			"amdrun: rocm-smi: 8 devices requested, 6 available\n",
		},
		{
			"package names do not reach the user", fmt.Errorf("--devices 3: launch: %w: device 3 is not visible", errors.New("selector: bad")), 1,
			"amdrun: --devices 3: bad: device 3 is not visible\n",
		},
		{
			"cobra unknown command", errors.New(`unknown command "extra" for "amdrun topo"`), 2,
			"amdrun: unknown command \"extra\" for \"amdrun topo\"\nRun 'amdrun --help' for usage.\n",
		},
		{
			"cobra argument count", errors.New(`accepts 0 arg(s), received 1`), 2,
			"amdrun: accepts 0 arg(s), received 1\nRun 'amdrun --help' for usage.\n",
		},
		{
			"bad request of the selector", fmt.Errorf("selector: %w: device 9 does not exist", selector.ErrBadRequest), 2,
			"amdrun: bad request: device 9 does not exist\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, out, errOut := cmdtest.Streams()
			f := &cmdutil.Factory{IOStreams: ios}
			if got := exitCode(f, tt.err); got != tt.code {
				t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.code)
			}
			if errOut.String() != tt.stderr {
				t.Errorf("stderr\n got %q\nwant %q", errOut, tt.stderr)
			}
			if out.Len() != 0 {
				t.Errorf("stdout %q, want nothing", out)
			}
		})
	}
}

// execute runs the command tree as Main does, without os.Args and exit.
func execute(f *cmdutil.Factory, args ...string) int {
	cmd := NewCmdRoot(f)
	cmd.SetArgs(args)
	return exitCode(f, cmd.ExecuteContext(context.Background()))
}

func TestCommandTree(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		probe bool
		code  int
		// stdout and stderr are substrings of the output.
		stdout, stderr []string
		// oneLine says stderr must be "amdrun: ..." plus the help hint.
		usage bool
	}{
		{name: "help does not probe", args: []string{"--help"}, stdout: []string{"amdrun [flags] SCRIPT [ARGS...]", "topo", "doctor", "--ngpus"}},
		{name: "subcommand help", args: []string{"topo", "--help"}, stdout: []string{"amdrun topo --json"}},
		{name: "version flag", args: []string{"--version"}, stdout: []string{"amdrun 1.2.3 ("}},
		{name: "version command", args: []string{"version"}, stdout: []string{"amdrun 1.2.3 ("}},
		{name: "version json", args: []string{"version", "--json"}, stdout: []string{`"version": "1.2.3"`, `"go": "go`}},
		{name: "unknown flag", args: []string{"--bogus", "t.py"}, code: 2, stderr: []string{"--bogus"}, usage: true},
		{name: "unknown subcommand flag", args: []string{"topo", "--bogus"}, code: 2, stderr: []string{"--bogus"}, usage: true},
		{name: "bad flag value", args: []string{"--ngpus", "two", "t.py"}, code: 2, stderr: []string{`amdrun: --ngpus: want a whole number, got "two"`}, usage: true},
		{name: "bad duration", args: []string{"--search-budget", "soon", "t.py"}, code: 2, stderr: []string{`amdrun: --search-budget: want a duration such as 30s or 10m, got "soon"`}, usage: true},
		{name: "bad switch", args: []string{"--dry-run=maybe", "t.py"}, code: 2, stderr: []string{`amdrun: --dry-run: want true or false, got "maybe"`}, usage: true},
		{name: "bad subcommand number", args: []string{"bench", "--size", "big"}, code: 2, stderr: []string{`amdrun: --size: want a whole number, got "big"`}, usage: true},
		{name: "unknown flag near one", args: []string{"--ngpux", "2", "t.py"}, code: 2, stderr: []string{"amdrun: unknown flag: --ngpux; did you mean --ngpus?"}, usage: true},
		{name: "unknown flag near a torchrun one", args: []string{"--nproc_per_nod3", "2", "t.py"}, code: 2, stderr: []string{"did you mean --nproc-per-node?"}, usage: true},
		{name: "unknown subcommand flag near one", args: []string{"topo", "--jsn"}, code: 2, stderr: []string{"amdrun: unknown flag: --jsn; did you mean --json?"}, usage: true},
		{name: "unknown flag near a global one", args: []string{"topo", "--sysfs-rot", "/"}, code: 2, stderr: []string{"did you mean --sysfs-root?"}, usage: true},
		{name: "flag error from validation", args: []string{"--policy", "best", "t.py"}, code: 2, stderr: []string{"--policy", "best"}, usage: true},
		{name: "missing script", args: []string{"-n", "2"}, code: 2, stderr: []string{"missing SCRIPT"}, usage: true},
		{name: "bad source", args: []string{"--source", "nope", "topo"}, code: 2, stderr: []string{"--source", "nope"}, usage: true},
		{name: "bad bandwidth", args: []string{"--bandwidth", "fast", "topo"}, code: 2, stderr: []string{"--bandwidth", "fast"}, usage: true},
		{name: "extra argument", args: []string{"topo", "extra"}, code: 2, stderr: []string{"extra"}, usage: true},
		{name: "bench flag error", args: []string{"bench", "--size", "0"}, code: 2, stderr: []string{"--size"}, usage: true},
		{
			name: "dry run on the example", args: []string{"--dry-run", "-n", "2", "t.py"}, probe: true,
			stdout: []string{"Devices:  0,1\n"},
		},
		{
			name: "topo piped", args: []string{"topo"}, probe: true,
			stdout: []string{"GPU\tGPU0\tGPU1\t", "\nGPU0\tX\tXGMI 200\t"},
		},
		{
			name: "not enough devices", args: []string{"--dry-run", "-n", "9", "t.py"}, probe: true, code: 1,
			stderr: []string{"amdrun: --ngpus 9: only 8 available"},
		},
		{
			name: "device that does not exist", args: []string{"--dry-run", "--devices", "12", "-n", "1", "t.py"}, probe: true, code: 2,
			stderr: []string{"amdrun: ", "12"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, out, errOut := testFactory(t, tt.probe, "AMDRUN_LEASE_DIR="+t.TempDir())
			f.Topo.Bandwidth = "theoretical"
			code := execute(f, tt.args...)
			if code != tt.code {
				t.Errorf("amdrun %q: exit %d, want %d\nstdout: %s\nstderr: %s", tt.args, code, tt.code, out, errOut)
			}
			for _, w := range tt.stdout {
				if !strings.Contains(out.String(), w) {
					t.Errorf("amdrun %q: stdout lacks %q:\n%s", tt.args, w, out)
				}
			}
			for _, w := range tt.stderr {
				if !strings.Contains(errOut.String(), w) {
					t.Errorf("amdrun %q: stderr lacks %q:\n%s", tt.args, w, errOut)
				}
			}
			if tt.usage {
				lines := strings.Split(strings.TrimSuffix(errOut.String(), "\n"), "\n")
				if len(lines) != 2 || !strings.HasPrefix(lines[0], "amdrun: ") || lines[1] != "Run 'amdrun --help' for usage." {
					t.Errorf("amdrun %q: stderr %q, want one error line and the help hint", tt.args, errOut)
				}
				if out.Len() != 0 {
					t.Errorf("amdrun %q: usage error printed on stdout: %q", tt.args, out)
				}
			}
			if tt.code == 1 && strings.Count(errOut.String(), "\n") != 1 {
				t.Errorf("amdrun %q: stderr %q, want one line", tt.args, errOut)
			}
		})
	}
}

// TestVersionFlagAndCommandAgree: `amdrun version` and `amdrun --version`
// print the same line.
func TestVersionFlagAndCommandAgree(t *testing.T) {
	f, out, _ := testFactory(t, false)
	execute(f, "version")
	cmdOut := out.String()
	out.Reset()
	execute(f, "--version")
	if cmdOut == "" || out.String() != cmdOut {
		t.Errorf("version printed %q, --version %q: want the same", cmdOut, out)
	}
}

var _ = flag.Bool("update", false, "rewrite docs/usage.md's table of flag words")

// TestFlagWordsDoc: docs/usage.md's table of the flags whose values shell
// completion offers is made from what it offers (cobra's __complete is
// what the completion scripts call) and from the declarations' notes of
// what else a flag takes (cmdutil.Enum.Also); no flag also completes
// file names.
func TestFlagWordsDoc(t *testing.T) {
	f, _, _ := testFactory(t, false)
	cmd := NewCmdRoot(f)
	var b strings.Builder
	b.WriteString("| Flag | Words |\n|---|---|\n")
	for _, fs := range []*pflag.FlagSet{cmd.Flags(), cmd.PersistentFlags()} {
		fs.VisitAll(func(fl *pflag.Flag) {
			if _, ok := cmd.GetFlagCompletionFunc(fl.Name); !ok {
				return
			}
			f, out, _ := testFactory(t, false)
			if code := execute(f, "__complete", "--"+fl.Name, ""); code != 0 {
				t.Errorf("__complete --%s: exit %d", fl.Name, code)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if lines[len(lines)-1] != ":4" { // cobra's directive: no file completion
				t.Errorf("__complete --%s: %q, want no file completion (:4)", fl.Name, lines)
			}
			words := lines[:len(lines)-1]
			for i, w := range words {
				words[i] = "`" + w + "`"
			}
			name := "`--" + fl.Name + "`"
			if fl.Shorthand != "" {
				name = "`-" + fl.Shorthand + "`/" + name
			}
			fmt.Fprintf(&b, "| %s | %s |\n", name, cmdutil.JoinOr(append(words, fl.Annotations[cmdutil.AlsoAnnotation]...)))
		})
	}
	cmdtest.DocBlock(t, "docs/usage.md", b.String())
	// A subcommand completes the root's persistent --source as well.
	f, out, _ := testFactory(t, false)
	execute(f, "__complete", "topo", "--source", "e")
	if !strings.Contains(out.String(), "example\n") {
		t.Errorf("topo --source completion: %q", out)
	}
}

// A SCRIPT that is not there (issue 31): a subcommand's near miss gets
// cobra's did-you-mean, any other one line before anything is probed
// or started, on one node or several, under torchrun or torch's agent;
// a file of a subcommand's near name is a script.
func TestScriptNotThere(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile("ps.py", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("tp", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	hint := "Run 'amdrun --help' for usage.\n"
	tests := []struct {
		args   []string
		probe  bool
		code   int
		stderr string
	}{
		{[]string{"tpo"}, false, 2, "amdrun: unknown command \"tpo\"; did you mean \"amdrun topo\"?\n" + hint},
		{[]string{"-n", "2", "docter", "--json"}, false, 2, "amdrun: unknown command \"docter\"; did you mean \"amdrun doctor\"?\n" + hint},
		{[]string{"-n", "2", "missing.py"}, false, 2, "amdrun: missing.py: no such file\n"},
		{[]string{"-n", "2", "--", "tpo"}, false, 2, "amdrun: tpo: no such file\n"},
		{[]string{"-n", "2", "t.py", "--lr", "1"}, false, 2, "amdrun: t.py: no such file\n"},
		{[]string{"--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.1", "-n", "1", "t.py"}, false, 2, "amdrun: t.py: no such file\n"},
		{[]string{"--launcher", "torchrun", "-n", "1", "t.py"}, false, 2, "amdrun: t.py: no such file\n"},
		{[]string{"--nnodes", "1:2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "10.0.0.1:29400", "-n", "1", "t.py"}, false, 2, "amdrun: t.py: no such file\n"},
		{[]string{"--dry-run", "-n", "1", "t.py"}, true, 0, ""},
		{[]string{"--dry-run", "-n", "1", "tp"}, true, 0, ""},
		{[]string{"--dry-run", "-n", "1", "ps.py"}, true, 0, ""},
	}
	for _, tt := range tests {
		f, out, errOut := testFactory(t, tt.probe, "AMDRUN_LEASE_DIR="+t.TempDir())
		f.Topo.Bandwidth = "theoretical"
		if code := execute(f, tt.args...); code != tt.code || errOut.String() != tt.stderr {
			t.Errorf("amdrun %q: exit %d, stderr %q; want %d, %q\nstdout: %s", tt.args, code, errOut, tt.code, tt.stderr, out)
		}
	}
}

// Every command's --help fits 80 columns when stdout is not a terminal
// (issue 31: 38 lines of amdrun --help were wider than 100; torchrun
// wraps at 78).
func TestHelpFitsWidth(t *testing.T) {
	f, _, _ := testFactory(t, false)
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			walk(sub, append(slices.Clone(path), sub.Name()))
		}
	}
	walk(NewCmdRoot(f), nil)
	if len(paths) < 10 {
		t.Fatalf("%d commands, want amdrun's and cobra's", len(paths))
	}
	for _, p := range paths {
		f, out, _ := testFactory(t, false)
		if code := execute(f, append(p, "--help")...); code != 0 {
			t.Errorf("amdrun %q --help: exit %d", p, code)
		}
		for _, l := range strings.Split(out.String(), "\n") {
			if len(l) > iostreams.DefaultWidth {
				t.Errorf("amdrun %q --help: a line of %d columns, want at most %d:\n%s", p, len(l), iostreams.DefaultWidth, l)
			}
		}
	}
}

func TestWrapLines(t *testing.T) {
	tests := []struct{ in, want string }{
		{"short line\nanother", "short line\nanother"},
		{"aaa bbb ccc ddd", "aaa bbb\nccc ddd"},
		{"  aaa bbb ccc", "  aaa bbb\n  ccc"},
		{"aaaaaaaaaaaa b", "aaaaaaaaaaaa\nb"},
		{"aaaaaaaaaaaaaa", "aaaaaaaaaaaaaa"},
	}
	for _, tt := range tests {
		if got := wrapLines(tt.in, 10); got != tt.want {
			t.Errorf("wrapLines(%q, 10) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// Every --python help and docs/usage.md give the interpreter's whole
// order, the one cmdutil.Factory.PythonFrom follows (issue 31: bench
// --help and usage.md left the active environments out).
func TestPythonOrderDocumented(t *testing.T) {
	order := []string{"$PYTHON_EXEC", "$VIRTUAL_ENV", "$CONDA_PREFIX", "python3"}
	inOrder := func(s string) bool {
		at := 0
		for _, w := range order {
			i := strings.Index(s[at:], w)
			if i < 0 {
				return false
			}
			at += i + len(w)
		}
		return true
	}
	f, _, _ := testFactory(t, false)
	n := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if fl := c.LocalFlags().Lookup("python"); fl != nil {
			n++
			if !inOrder(fl.Usage) {
				t.Errorf("amdrun %s --python: %q, want %v in that order", c.Name(), fl.Usage, order)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewCmdRoot(f))
	if n < 3 {
		t.Errorf("%d commands with --python, want the launch, bench and doctor", n)
	}
	doc, err := os.ReadFile("../../../../docs/usage.md")
	if err != nil {
		t.Fatal(err)
	}
	_, worker, _ := strings.Cut(string(doc), "The worker command is")
	if !inOrder(worker[:min(len(worker), 300)]) {
		t.Errorf("docs/usage.md: the worker command's interpreter is not %v in that order", order)
	}
}

// wrapLines keeps every word, in order, and makes every line fit unless
// it is one word (after its indentation) wider than the width.
func FuzzWrapLines(f *testing.F) {
	f.Add("Ranks and devices: --ngpus is the number of devices, --nproc-per-node the number of ranks.", 80)
	f.Add("      ", 3)
	f.Add("  tree  (default) maximise the weakest link of the widest spanning tree", 30)
	f.Add("a  b", 1)
	f.Fuzz(func(t *testing.T, s string, width int) {
		if width < 1 || width > 200 || strings.ContainsAny(s, "\t\r") {
			return
		}
		got := wrapLines(s, width)
		if !slices.Equal(strings.Fields(got), strings.Fields(s)) {
			t.Fatalf("wrapLines(%q, %d) = %q: words changed", s, width, got)
		}
		for _, l := range strings.Split(got, "\n") {
			if len(l) > width && strings.Contains(strings.TrimSpace(l), " ") {
				t.Fatalf("wrapLines(%q, %d): line %q is wider and could break", s, width, l)
			}
		}
	})
}
