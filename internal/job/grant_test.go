package job

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/slurm"
)

// TestGrantBoundsCandidates: the GPUs Slurm granted bound the devices
// chosen among, with or without a visible-device variable (issue 24:
// with none, a 1-GPU step chose among all the node's devices).
func TestGrantBoundsCandidates(t *testing.T) {
	m, err := discover.Example() // 8 devices
	if err != nil {
		t.Fatal(err)
	}
	seven := &slurm.Grant{IDs: []int{7}, IDsVar: "SLURM_STEP_GPUS=7", Count: 1}
	tests := []struct {
		name string
		env  []string
		want []int
		warn string
		err  string
	}{
		{name: "no visible-device variable", want: []int{7}},
		{name: "the same list", env: []string{"CUDA_VISIBLE_DEVICES=7"}, want: []int{7}},
		{name: "a wider list", env: []string{"HIP_VISIBLE_DEVICES=0,7"}, want: []int{7},
			warn: "devices 0 are visible but not granted to this task (SLURM_STEP_GPUS=7): left out"},
		{name: "a list outside the grant", env: []string{"CUDA_VISIBLE_DEVICES=0"},
			err: "launch: bad visible-device list: CUDA_VISIBLE_DEVICES leaves devices 0 visible, none of which SLURM_STEP_GPUS=7 grants"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var warned []string
			o := &Options{}
			o.Grant = seven
			o.Warn = func(format string, args ...any) { warned = append(warned, fmt.Sprintf(format, args...)) }
			mask, err := plan.ParseMask(tt.env, m.Devices)
			if err != nil {
				t.Fatal(err)
			}
			got, err := o.grantMask(m, mask)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err || !errors.Is(err, plan.ErrMask) {
					t.Fatalf("grantMask = %v; want error %q", err, tt.err)
				}
				return
			}
			if err != nil || !slices.Equal(got.Candidates(), tt.want) {
				t.Fatalf("candidates %v, %v; want %v", got.Candidates(), err, tt.want)
			}
			if (tt.warn == "") != (len(warned) == 0) || (tt.warn != "" && warned[0] != tt.warn) {
				t.Errorf("warned %q; want %q", warned, tt.warn)
			}
		})
	}
}

// TestGrantedTaskWithoutGPU: a task Slurm granted GPUs that finds none
// fails in one line, unless --ngpus 0 (Ranks.NoGPUOK) asks for CPU ranks.
// Before issue 24 it ran one CPU rank with a warning and exited 0.
func TestGrantedTaskWithoutGPU(t *testing.T) {
	noGPU := fmt.Errorf("%w (no KFD topology)", discover.ErrNoGPU)
	var warned []string
	o := &Options{}
	o.SourceAuto, o.Grant = true, &slurm.Grant{IDs: []int{7}, IDsVar: "SLURM_STEP_GPUS=7", Count: 1}
	o.Warn = func(format string, args ...any) { warned = append(warned, fmt.Sprintf(format, args...)) }
	p, err := cpuFallback(o, noGPU)
	if err == nil || p != nil || strings.Contains(err.Error(), "\n") || !errors.Is(err, discover.ErrNoGPU) ||
		!strings.HasPrefix(err.Error(), "slurm granted this task GPUs (SLURM_STEP_GPUS=7) but amdrun finds none: ") ||
		!strings.HasSuffix(err.Error(), "(--ngpus 0 runs CPU ranks instead)") {
		t.Fatalf("cpuFallback = %+v, %v; want one line naming the grant and --ngpus 0", p, err)
	}
	o.Ranks.NoGPUOK = true
	if p, err := cpuFallback(o, noGPU); err != nil || p.cpuRanks != 1 || len(warned) != 1 {
		t.Errorf("with --ngpus 0: %+v, %v, warned %q; want one CPU rank and the no-GPU warning", p, err, warned)
	}
	o.Ranks.NoGPUOK, o.Grant = false, &slurm.Grant{}
	if p, err := cpuFallback(o, noGPU); err != nil || p.cpuRanks != 1 {
		t.Errorf("nothing granted: %+v, %v; want one CPU rank", p, err)
	}
}

// TestNoGPULineOnlyWhenGPUsAsked: without a GPU, CPU ranks are said in
// one line only when the request means GPUs (--ngpus N, or no rank
// count); a count of ranks runs on CPUs quietly, as torchrun (issue 31).
func TestNoGPULineOnlyWhenGPUsAsked(t *testing.T) {
	noGPU := fmt.Errorf("%w (no KFD topology)", discover.ErrNoGPU)
	for _, tt := range []struct {
		args   []string
		ranks  int
		warned bool
	}{
		{nil, 1, true},
		{[]string{"--ngpus", "2"}, 2, true},
		{[]string{"--ngpus", "2", "--nproc-per-node", "1"}, 1, true},
		{[]string{"--nproc-per-node", "2"}, 2, false},
		{[]string{"--nproc-per-node", "auto"}, 3, false},
		{[]string{"--nproc-per-node", "auto", "--ngpus", "2"}, 3, true},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var warned []string
			o := nprocOptions(t, tt.args...)
			o.SourceAuto = true
			o.NumCPU = func() int { return 3 }
			o.Warn = func(format string, args ...any) { warned = append(warned, fmt.Sprintf(format, args...)) }
			p, err := cpuFallback(o, noGPU)
			if err != nil || p.cpuRanks != tt.ranks || (len(warned) == 1) != tt.warned || len(warned) > 1 {
				t.Errorf("cpuFallback = %+v, %v, warned %q; want %d ranks, warned %v", p, err, warned, tt.ranks, tt.warned)
			}
		})
	}
}

// nprocOptions are Options after --ngpus and --nproc-per-node in args
// (flag, value pairs) were read.
func nprocOptions(t *testing.T, args ...string) *Options {
	t.Helper()
	vals := map[string]string{}
	for i := 0; i+1 < len(args); i += 2 {
		vals[strings.TrimPrefix(args[i], "--")] = args[i+1]
	}
	o := &Options{}
	l := &CommandLine{}
	if v, ok := vals["ngpus"]; ok {
		give(&l.NGPUs, "ngpus", v)
	}
	if v, ok := vals["nproc-per-node"]; ok {
		give(&l.NProcPerNode, "nproc-per-node", v)
	}
	if err := o.resolveRanks(l, 0); err != nil {
		t.Fatal(err)
	}
	return o
}

// Issue 35: a launch asks the selector for runner-ups only when it prints
// them (--explain, the dry run's text and --json); a plain launch asks
// for none (Alternatives -1), so their search costs it nothing.
func TestRunnerUpsOnlyWhenPrinted(t *testing.T) {
	m, err := discover.Example()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		explain, dryRun bool
		want            int
	}{{false, false, -1}, {true, false, 0}, {false, true, 0}, {true, true, 0}} {
		o := &Options{Explain: tc.explain}
		o.NoLease = true
		res, err := reservation(o, m, &plan.Mask{}, tc.dryRun)
		if err != nil {
			t.Fatal(err)
		}
		if res.Request.Alternatives != tc.want {
			t.Errorf("explain %v, dry run %v: Alternatives %d, want %d", tc.explain, tc.dryRun, res.Request.Alternatives, tc.want)
		}
	}
}

// text is a flag's value held as text, as pflag's string value.
type text string

func (t *text) String() string     { return string(*t) }
func (t *text) Set(s string) error { *t = text(s); return nil }
func (t *text) Type() string       { return "string" }

// give declares a as the flag name and gives it v.
func give(a *Arg, name, v string) {
	new(CommandLine).Declare(a, name, new(text), Own, "")
	if err := a.Set(v); err != nil {
		panic(err)
	}
}
