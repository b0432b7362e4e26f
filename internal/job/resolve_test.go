package job

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/plan"
)

// resolved are Options after Resolve of a command line with the
// command's defaults and the flags given sets (give), in the
// environment env, and the warnings Resolve printed.
func resolved(t *testing.T, env []string, given func(l *CommandLine)) (*Options, []string, error) {
	t.Helper()
	return resolvedWith(t, env, func(*Options) {}, given)
}

// resolvedWith is resolved with the settings the command binds into
// Options (--launcher, --master-port, ...) set by set.
func resolvedWith(t *testing.T, env []string, set func(o *Options), given func(l *CommandLine)) (*Options, []string, error) {
	t.Helper()
	l := &CommandLine{}
	for a, d := range map[*Arg]string{&l.NNodes: "1", &l.Grace: "10s", &l.RestartWait: "30s", &l.StallTimeout: "auto"} {
		l.Declare(a, "default", (*text)(&d), Own, "")
	}
	given(l)
	var warned []string
	o := &Options{}
	o.Launcher, o.SearchWork, o.SearchBudget, o.MasterAddr = "amdrun", 1, time.Second, plan.DefaultMasterAddr
	set(o)
	o.Env = func() []string { return env }
	o.Warn = func(format string, args ...any) { warned = append(warned, fmt.Sprintf(format, args...)) }
	err := o.Resolve(context.Background(), l)
	return o, warned, err
}

// TestResolveReadsFields: Resolve reads each flag from its field of
// CommandLine: torchrun's --shutdown-timeout is the grace, --wait is
// parsed, --nnodes 1:1 is one node, a static
// endpoint is the master, --rdzv-id the run id, and an error names the
// PET_* variable a value came from.
func TestResolveReadsFields(t *testing.T) {
	o, warned, err := resolved(t, nil, func(l *CommandLine) {
		give(&l.ShutdownTimeout, "shutdown-timeout", "3")
		give(&l.Wait, "wait", "2m")
		give(&l.NNodes, "nnodes", "1:1")
		give(&l.RdzvEndpoint, "rdzv-endpoint", "h0:1234")
		give(&l.RdzvID, "rdzv-id", "job7")
		l.Declare(&l.LocalAddr, "local-addr", new(text), TorchPET|Pass|AgentOnly, "why")
		_ = l.LocalAddr.Set("h1")
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.Grace != 3*time.Second || o.Wait != 2*time.Minute || o.NNodes != 1 ||
		o.MasterAddr != "h0" || o.MasterPort != 1234 || o.RunID != "job7" {
		t.Errorf("Resolve: grace %v wait %v nnodes %d master %s:%d run id %q", o.Grace, o.Wait, o.NNodes, o.MasterAddr, o.MasterPort, o.RunID)
	}
	if len(warned) != 1 || warned[0] != "--local-addr does nothing under amdrun: why" {
		t.Errorf("warned %q, want one line on --local-addr", warned)
	}
	_, _, err = resolved(t, nil, func(l *CommandLine) {
		give(&l.NNodes, "nnodes", "two")
		l.NNodes.From("PET_NNODES")
	})
	if err == nil || err.Error() != `PET_NNODES: want a number of nodes, got "two"` {
		t.Errorf("PET_NNODES=two: %v", err)
	}
}

// line gives the flags of args, flag and value pairs (a switch's value
// "true"), on l.
func line(args ...string) func(l *CommandLine) {
	return func(l *CommandLine) {
		byName := map[string]*Arg{"--ngpus": &l.NGPUs, "--nproc-per-node": &l.NProcPerNode, "--nnodes": &l.NNodes,
			"--dry-run": &l.DryRun, "--standalone": &l.Standalone, "--rdzv-backend": &l.RdzvBackend,
			"--rdzv-endpoint": &l.RdzvEndpoint, "--rdzv-id": &l.RdzvID, "--master-port": &l.MasterPort}
		for i := 0; i+1 < len(args); i += 2 {
			give(byName[args[i]], args[i][2:], args[i+1])
		}
	}
}

// TestResolveRanks: Resolve works out this node's ranks once, from
// --ngpus and --nproc-per-node (and torchrun's one rank where torch's
// agent runs a job without a count), and refuses a count the job cannot
// run, in one line.
func TestResolveRanks(t *testing.T) {
	torchrun := func(o *Options) { o.Launcher = "torchrun" }
	keep := func(*Options) {}
	for _, tt := range []struct {
		args []string
		set  func(o *Options)
		want Ranks
		err  string
	}{
		{args: nil, want: Ranks{}},
		{args: []string{"--ngpus", "2"}, want: Ranks{GPUs: 2, N: 2}},
		{args: []string{"--ngpus", "0"}, want: Ranks{NoGPUOK: true}},
		{args: []string{"--nproc-per-node", "4"}, want: Ranks{GPUs: 4, N: 4, NoGPU: QuietCPU}},
		{args: []string{"--ngpus", "8", "--nproc-per-node", "2"}, want: Ranks{GPUs: 8, N: 2}},
		{args: []string{"--ngpus", "4", "--nproc-per-node", "1"}, want: Ranks{GPUs: 4, N: 1}},
		{args: []string{"--ngpus", "0", "--nproc-per-node", "4"}, want: Ranks{N: 4, CPU: true, NoGPUOK: true}},
		{args: []string{"--nproc-per-node", "cpu"}, want: Ranks{CPU: true, PerCPU: true}},
		{args: []string{"--ngpus", "0", "--nproc-per-node", "cpu"}, want: Ranks{CPU: true, PerCPU: true, NoGPUOK: true}},
		{args: []string{"--nproc-per-node", "auto"}, want: Ranks{PerCPU: true, NoGPU: QuietCPU}},
		{args: []string{"--nproc-per-node", "auto", "--ngpus", "2"}, want: Ranks{GPUs: 2, N: 2, PerCPU: true}},
		{args: []string{"--nproc-per-node", "gpu"}, want: Ranks{NoGPU: NeedGPU}},
		{args: []string{"--nproc-per-node", " 3 "}, want: Ranks{GPUs: 3, N: 3, NoGPU: QuietCPU}},
		// torch's agent runs an elastic job: torchrun's one rank.
		{args: []string{"--nnodes", "2:4"}, want: Ranks{GPUs: 1, N: 1}},
		{args: []string{"--nnodes", "2:4", "--nproc-per-node", "auto"}, want: Ranks{GPUs: 1, N: 1, NoGPU: QuietCPU}},
		{args: []string{"--nnodes", "2:4", "--ngpus", "0", "--nproc-per-node", "2"}, want: Ranks{N: 2, CPU: true, NoGPUOK: true}},
		{args: []string{"--dry-run", "true"}, set: torchrun, want: Ranks{}},
		{args: []string{"--ngpus", "-1"}, err: "--ngpus must be at least 0 (0 means every free device), got -1"},
		{args: []string{"--ngpus", "6", "--nproc-per-node", "4"}, err: "--ngpus 6 does not split over --nproc-per-node 4 ranks: each rank gets ngpus/nproc devices"},
		{args: []string{"--ngpus", "2", "--nproc-per-node", "cpu"}, err: "--nproc-per-node cpu runs ranks without GPUs: it cannot be used with --ngpus 2"},
		{args: []string{"--nproc-per-node", "xpu"}, err: "--nproc-per-node xpu: amdrun runs on AMD and NVIDIA GPUs, not Intel XPUs"},
		{args: []string{"--nproc-per-node", "0"}, err: `--nproc-per-node: want a number of ranks or a word, got "0"`},
		{args: []string{"--nproc-per-node", "99999999"}, err: "--nproc-per-node 99999999: more ranks than this node can run"},
		{args: []string{"--ngpus", "0", "--nproc-per-node", "2"}, set: func(o *Options) { o.Devices = []int{0} },
			err: "--devices and --exclude choose GPUs: they do not apply to CPU ranks (--ngpus 0 or --nproc-per-node cpu)"},
		{args: []string{"--nproc-per-node", "cpu"}, set: func(o *Options) { o.Exclude = []int{1} }, err: "do not apply to CPU ranks"},
		{args: []string{"--ngpus", "4", "--nproc-per-node", "1"}, set: func(o *Options) { o.RanksFilter = []int{1} },
			err: ": local rank 1 does not exist with 1 rank(s) (0-0)"},
		{args: nil, set: func(o *Options) { o.RanksFilter = []int{9} }, want: Ranks{}},
		{args: nil, set: torchrun, err: "--launcher torchrun needs --ngpus or --nproc-per-node N"},
		{args: []string{"--ngpus", "4", "--nproc-per-node", "2"}, set: torchrun, err: "several devices per rank need --launcher amdrun"},
		{args: []string{"--nnodes", "2"}, err: "--nnodes 2 needs --ngpus or --nproc-per-node N: every node must run the same number of ranks"},
		{args: []string{"--nnodes", "2", "--nproc-per-node", "cpu"}, want: Ranks{CPU: true, PerCPU: true}},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			set := tt.set
			if set == nil {
				set = keep
			}
			o, _, err := resolvedWith(t, nil, set, line(tt.args...))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.Ranks != tt.want {
				t.Errorf("Ranks %+v, want %+v", o.Ranks, tt.want)
			}
		})
	}
}

// TestResolveDefaults: each default of the master and the run id is
// decided once, and a zero value means one thing: MasterPort 0 a free
// port (plan.NewPlan picks it), 29500 only on several nodes whatever
// the launcher (--launcher torchrun --nnodes 2 passed torchrun
// --master_port 0 before), RunID "" a fresh id.
func TestResolveDefaults(t *testing.T) {
	port := func(p int) func(o *Options) { return func(o *Options) { o.MasterPort = p } }
	for _, tt := range []struct {
		args   []string
		set    func(o *Options)
		addr   string
		port   int
		runID  string
		warned string
	}{
		{args: nil, addr: "127.0.0.1"},
		{args: []string{"--ngpus", "2"}, set: port(1234), addr: "127.0.0.1", port: 1234},
		{args: []string{"--nnodes", "2", "--ngpus", "1"}, addr: "127.0.0.1", port: 29500,
			warned: "--nnodes 2 without --master-addr: the nodes meet at 127.0.0.1:29500, as with torchrun, so every node must run on this machine"},
		{args: []string{"--nnodes", "2", "--ngpus", "1"}, set: func(o *Options) { o.Launcher = "torchrun" }, addr: "127.0.0.1", port: 29500,
			warned: "--nnodes 2 without --master-addr"},
		{args: []string{"--nnodes", "2", "--ngpus", "1", "--master-port", "1234"}, set: port(1234), addr: "127.0.0.1", port: 1234,
			warned: "--nnodes 2 without --master-addr: the nodes meet at 127.0.0.1:1234"},
		{args: []string{"--nnodes", "2", "--ngpus", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", "n0:29400"}, addr: "127.0.0.1", port: 29500,
			warned: "--rdzv-backend c10d on several nodes: amdrun chooses and leases this node's devices"},
		{args: []string{"--standalone", "true", "--master-port", "1234"}, set: port(1234), addr: "127.0.0.1",
			warned: "--standalone: ignoring --master-port (a standalone job rendezvouses on a free local port, as with torchrun)"},
		{args: []string{"--rdzv-endpoint", "h0:1234", "--rdzv-id", "job7"}, addr: "h0", port: 1234, runID: "job7"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			set := tt.set
			if set == nil {
				set = func(*Options) {}
			}
			o, warned, err := resolvedWith(t, nil, set, line(tt.args...))
			if err != nil {
				t.Fatal(err)
			}
			if o.MasterAddr != tt.addr || o.MasterPort != tt.port || o.RunID != tt.runID {
				t.Errorf("master %s:%d run id %q, want %s:%d %q", o.MasterAddr, o.MasterPort, o.RunID, tt.addr, tt.port, tt.runID)
			}
			if got := strings.Join(warned, "\n"); (tt.warned == "") != (got == "") || !strings.HasPrefix(got, tt.warned) {
				t.Errorf("warned %q, want %q", got, tt.warned)
			}
		})
	}
}

// FuzzResolveRanks: no --ngpus and --nproc-per-node pair panics, and
// the ranks resolved hold together: devices split evenly over the ranks,
// CPU ranks choose no device.
func FuzzResolveRanks(f *testing.F) {
	for _, s := range [][2]string{{"", ""}, {"2", ""}, {"0", "4"}, {"8", "2"}, {"", "auto"}, {"", "cpu"}, {"2", "gpu"}, {"6", "4"}, {"-1", "x"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, ngpus, nproc string) {
		var args []string
		if _, err := strconv.Atoi(ngpus); err == nil {
			args = append(args, "--ngpus", ngpus) // an int flag: pflag refuses any other
		}
		if nproc != "" {
			args = append(args, "--nproc-per-node", nproc)
		}
		o, _, err := resolvedWith(t, nil, func(*Options) {}, line(args...))
		if err != nil {
			return
		}
		r := o.Ranks
		if r.N < 0 || r.GPUs < 0 || r.N > 0 && r.GPUs > 0 && r.GPUs%r.N != 0 || r.CPU && r.GPUs != 0 || r.CPURanks(func() int { return 3 }) < 1 {
			t.Errorf("--ngpus %q --nproc-per-node %q: %+v", ngpus, nproc, r)
		}
	})
}
