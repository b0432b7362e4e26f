package topology_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
	"github.com/amdrun/amdrun/internal/topology/amdsmi"
	"github.com/amdrun/amdrun/internal/topology/rocmsmi"
)

// Issue 24's promise, attacked the way captures break: every mutant of a
// real amd-smi or rocm-smi capture (cut at each line boundary, two cells
// of a line merged, two adjacent lines swapped, CRLF line ends, ANSI
// escapes around lines) is read right, warned, or refused in one line.
// "Silently wrong" is a mutant read with no error and the same warnings
// as the original but a model that differs from the original's.

// mutant is one altered capture and how it was made.
type mutant struct {
	how  string
	data []byte
}

// mutants returns the mutants of data.
func mutants(data []byte) []mutant {
	lines := strings.SplitAfter(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	join := func(ls []string) []byte { return []byte(strings.Join(ls, "")) }
	var out []mutant
	for k := 0; k < len(lines); k++ {
		out = append(out, mutant{fmt.Sprintf("cut after line %d", k), join(lines[:k])})
	}
	for i, l := range lines {
		fs := topology.SplitFields(l)
		for k := 1; k < len(fs); k++ {
			end := fs[k-1].Col + len(fs[k-1].S)
			merged := l[:end] + l[fs[k].Col:]
			ls := append(append(append([]string{}, lines[:i]...), merged), lines[i+1:]...)
			out = append(out, mutant{fmt.Sprintf("line %d: cells %d and %d merged", i+1, k-1, k), join(ls)})
		}
	}
	for i := 0; i+1 < len(lines); i++ {
		if lines[i] == lines[i+1] {
			continue
		}
		ls := append([]string{}, lines...)
		ls[i], ls[i+1] = ls[i+1], ls[i]
		out = append(out, mutant{fmt.Sprintf("lines %d and %d swapped", i+1, i+2), join(ls)})
	}
	out = append(out, mutant{"CRLF", bytes.ReplaceAll(data, []byte("\n"), []byte("\r\n"))})
	ansi := func(l string) string {
		body := strings.TrimRight(l, "\n")
		return "\x1b[1m" + body + "\x1b[0m" + l[len(body):]
	}
	all := make([]string, len(lines))
	for i, l := range lines {
		all[i] = ansi(l)
		ls := append([]string{}, lines...)
		ls[i] = ansi(l)
		out = append(out, mutant{fmt.Sprintf("line %d in ANSI escapes", i+1), join(ls)})
	}
	out = append(out, mutant{"every line in ANSI escapes", join(all)})
	return out
}

// reading is what a source made of its outputs.
type reading struct {
	model string // the model as JSON; "" on error
	warns []string
	err   error
}

// readAMD runs amdsmi.Discover on a topology and a default table (nil:
// the call fails as an old amd-smi's does).
func readAMD(topo, deflt []byte) reading {
	var r reading
	run := func(_ context.Context, name string, args ...string) ([]byte, error) {
		switch {
		case len(args) == 1 && args[0] == "topology":
			return topo, nil
		case len(args) == 0 && deflt != nil:
			return deflt, nil
		}
		return nil, &topology.ToolError{Tool: name, Args: args, ExitCode: 2}
	}
	m, err := amdsmi.Discover(context.Background(), run, func(f string, a ...any) { r.warns = append(r.warns, fmt.Sprintf(f, a...)) })
	return r.done(m, err)
}

// readROCm runs rocmsmi.Discover on a --showtopo output, the other calls
// failing.
func readROCm(topo []byte) reading {
	var r reading
	run := func(_ context.Context, name string, args ...string) ([]byte, error) {
		if strings.Join(args, " ") == strings.Join(rocmsmi.TopoArgs, " ") {
			return topo, nil
		}
		return nil, &topology.ToolError{Tool: name, Args: args, ExitCode: 1}
	}
	m, err := rocmsmi.Discover(context.Background(), run, func(f string, a ...any) { r.warns = append(r.warns, fmt.Sprintf(f, a...)) })
	return r.done(m, err)
}

func (r reading) done(m *topology.Model, err error) reading {
	if r.err = err; err == nil {
		b, jerr := json.Marshal(m)
		if jerr != nil {
			r.err = jerr
		}
		r.model = string(b)
	}
	return r
}

// tally counts mutants by outcome.
type tally struct{ right, warned, refused int }

func (c tally) total() int { return c.right + c.warned + c.refused }

// attack reads every mutant of data with read and checks each against
// the original's reading.
func attack(t *testing.T, name string, data []byte, read func([]byte) reading, c *tally) {
	t.Helper()
	orig := read(data)
	if orig.err != nil {
		t.Fatalf("%s: the original is refused: %v", name, orig.err)
	}
	for _, mu := range mutants(data) {
		got := read(mu.data)
		switch {
		case got.err != nil:
			if strings.Contains(got.err.Error(), "\n") {
				t.Errorf("%s, %s: error of several lines: %q", name, mu.how, got.err)
			}
			c.refused++
		case strings.Join(got.warns, "\n") != strings.Join(orig.warns, "\n"):
			c.warned++
		case got.model == orig.model:
			c.right++
		default:
			t.Errorf("%s, %s: read silently wrong (no error, the original's warnings %q, another model)", name, mu.how, orig.warns)
		}
	}
}

func TestMutatedCapturesNeverSilentlyWrong(t *testing.T) {
	pub := func(name string) []byte { return testutil.ReadFile(t, testutil.Public(t, name)) }
	var c tally
	pairs := []struct{ topo, deflt string }{
		{"amd-smi-topology-mi300x-8gpu-xgmi.txt", "amd-smi-default-mi300x-dpx-16dev-derived.txt"},
		{"amd-smi-topology-mi355x-8gpu-xgmi.txt", "amd-smi-default-mi355x-8gpu.txt"},
		{"amd-smi-topology-mi300x-8gpu-no-link-type-table-derived.txt", ""},
		{"amd-smi-topology-mi300x-8gpu-no-numa-bw-table-derived.txt", ""},
	}
	if !testing.Short() {
		pairs = append(pairs, struct{ topo, deflt string }{"amd-smi-topology-mi300x-8gpu-xgmi.txt", "amd-smi-default-mi300x-cpx-64dev-derived.txt"})
	}
	for _, p := range pairs {
		topo := pub(p.topo)
		var deflt []byte
		if p.deflt != "" {
			deflt = pub(p.deflt)
			attack(t, p.deflt, deflt, func(b []byte) reading { return readAMD(topo, b) }, &c)
		}
		attack(t, p.topo, topo, func(b []byte) reading { return readAMD(b, deflt) }, &c)
	}
	amd := c.total()
	for _, f := range []string{
		"rocm-smi-showtopo-mi210-4gpu-xgmi-nps4-archer2.txt",
		"rocm-smi-showtopo-mi300a-4apu.txt",
		"rocm-smi-showtopo-mi308x-8gpu.txt",
		"rocm-smi-showtopo-mi300x-tpx-broken-12-partitions.txt",
		"rocm-smi-shownodesbw-8gpu-fullmesh-xgmi.txt",
		"rocm-smi-shownodesbw-8gpu-partial-xgmi-rocm-release-notes.txt",
	} {
		attack(t, f, pub(f), readROCm, &c)
	}
	t.Logf("%d mutants (%d of amd-smi captures, %d of rocm-smi): %d read right, %d warned, %d refused, none silently wrong",
		c.total(), amd, c.total()-amd, c.right, c.warned, c.refused)
	if c.total() < 1000 {
		t.Errorf("only %d mutants", c.total())
	}
}
