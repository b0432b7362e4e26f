package runcmd_test

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/runcmd"
	"github.com/amdrun/amdrun/internal/job"
	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/plan"
)

// torchrunOptions are the options of torchrun as torch/distributed/run.py
// declares them: in torch 1.13 (underscore spellings only) and in the
// current release (hyphenated spellings with underscore aliases; the
// later ones: --local-addr, --local-ranks-filter, --logs-specs,
// --event-log-handler, --numa-binding, --signals-to-handle,
// --shutdown-timeout, --virtual-local-rank, --duplicate-*-filters).
var torchrunOptions = []string{
	"--nnodes", "--nproc-per-node", "--rdzv-backend", "--rdzv-endpoint", "--rdzv-id", "--rdzv-conf",
	"--standalone", "--max-restarts", "--monitor-interval", "--start-method", "--event-log-handler",
	"--role", "-m", "--module", "--no-python", "--run-path", "--log-dir", "-r", "--redirects", "-t", "--tee",
	"--local-ranks-filter", "--duplicate-stdout-filters", "--duplicate-stderr-filters", "--node-rank",
	"--master-addr", "--master-port", "--local-addr", "--logs-specs", "--numa-binding",
	"--signals-to-handle", "--shutdown-timeout", "--virtual-local-rank",
}

// torchrunCase feeds torchrun flags; check looks at the Options, or err
// names what the error must say.
type torchrunCase struct {
	args  []string
	check func(o *runcmd.Options) string // "" when right
	err   string
	warn  string // what the one warning says, if any
}

func torchrunCases() []torchrunCase {
	eq := func(name string, got, want any) string {
		if !reflect.DeepEqual(got, want) {
			return fmt.Sprintf("%s = %v, want %v", name, got, want)
		}
		return ""
	}
	tr := []string{"--launcher", "torchrun", "-n", "2"}
	return []torchrunCase{
		{args: []string{"--nnodes", "1:1"}, check: func(o *runcmd.Options) string {
			return eq("NNodes, ElasticNNodes", []any{o.NNodes, o.ElasticNNodes}, []any{1, ""})
		}},
		{args: []string{"--nnodes", "2:4"}, check: func(o *runcmd.Options) string {
			return eq("Launcher, Agent, ElasticNNodes, Ranks.N", []any{o.Launcher, o.Agent, o.ElasticNNodes, o.Ranks.N}, []any{"torchrun", true, "2:4", 1})
		}, warn: "--nnodes 2:4: amdrun chooses and leases this node's devices, torch's elastic agent (python -m torch.distributed.run) runs the rendezvous and restarts"},
		{args: []string{"--nproc-per-node", "4"}, check: func(o *runcmd.Options) string {
			return eq("Ranks", o.Ranks, job.Ranks{GPUs: 4, N: 4, NoGPU: job.QuietCPU})
		}},
		{args: []string{"--nproc-per-node", "gpu"}, check: func(o *runcmd.Options) string { return eq("Ranks", o.Ranks, job.Ranks{NoGPU: job.NeedGPU}) }},
		{args: []string{"--nproc-per-node", "auto"}, check: func(o *runcmd.Options) string {
			return eq("Ranks", o.Ranks, job.Ranks{PerCPU: true, NoGPU: job.QuietCPU})
		}},
		{args: []string{"--nproc-per-node", "cpu"}, check: func(o *runcmd.Options) string { return eq("Ranks", o.Ranks, job.Ranks{CPU: true, PerCPU: true}) }},
		{args: []string{"--nproc-per-node", "xpu"}, err: "not Intel XPUs"},
		{args: []string{"--nproc-per-node", "0"}, err: `--nproc-per-node: want a number of ranks (at least 1), gpu, auto or cpu, got "0"`},
		{args: []string{"--rdzv-backend", "c10d"}, check: func(o *runcmd.Options) string { return eq("Rdzv", len(o.Rdzv), 0) }},
		{args: []string{"--rdzv-backend", "c10d", "--rdzv-endpoint", "n0:29400", "--nnodes", "2", "-n", "2"}, check: func(o *runcmd.Options) string {
			return eq("Launcher, Agent, Rdzv, Ranks.GPUs", []any{o.Launcher, o.Agent, o.Rdzv, o.Ranks.GPUs},
				[]any{"torchrun", true, map[string]string{"backend": "c10d", "endpoint": "n0:29400"}, 2})
		}, warn: "--rdzv-backend c10d on several nodes: amdrun chooses and leases"},
		{args: []string{"--rdzv-endpoint", "10.0.0.1:29600"}, check: func(o *runcmd.Options) string {
			return eq("master", fmt.Sprintf("%s:%d", o.MasterAddr, o.MasterPort), "10.0.0.1:29600")
		}},
		{args: []string{"--rdzv-endpoint", "[::1]:29600", "--rdzv-backend", "static"}, check: func(o *runcmd.Options) string {
			return eq("master", fmt.Sprintf("%s:%d", o.MasterAddr, o.MasterPort), "::1:29600")
		}},
		{args: []string{"--rdzv-endpoint", "node0"}, err: `--rdzv-endpoint: want HOST:PORT, got "node0"`},
		{args: []string{"--rdzv-id", "job5"}, check: func(o *runcmd.Options) string { return eq("RunID", o.RunID, "job5") }},
		{args: []string{"--rdzv-conf", "join_timeout=60"}, check: func(o *runcmd.Options) string { return "" }, warn: "--rdzv-conf: join_timeout hold at once"},
		{args: []string{"--rdzv-conf", "timeout=9, is_host=1"}, check: func(o *runcmd.Options) string { return "" }, warn: "timeout hold at once (one node: amdrun starts its ranks together, no node waits for another); is_host do nothing"},
		{args: []string{"--rdzv-conf", "read_timeout=soon"}, err: "--rdzv-conf: read_timeout=soon: want a whole number of seconds"},
		{args: []string{"--rdzv-conf", "=5"}, err: `--rdzv-conf: want KEY=VALUE,...,KEY=VALUE, got "=5"`},
		{args: []string{"--rdzv-conf", "is_host"}, err: "--rdzv-conf: is_host has no value"},
		{args: append([]string{"--rdzv-conf", "join_timeout=60", "--rdzv-id", "j"}, tr...), check: func(o *runcmd.Options) string {
			return eq("Rdzv", o.Rdzv, map[string]string{"conf": "join_timeout=60", "id": "j"})
		}},
		{args: []string{"--standalone", "--master-port", "1234"}, check: func(o *runcmd.Options) string {
			return eq("master", fmt.Sprintf("%s:%d", o.MasterAddr, o.MasterPort), "127.0.0.1:0")
		}},
		{args: []string{"--standalone", "--nnodes", "2"}, err: "--standalone runs one node"},
		{args: []string{"--max-restarts", "3"}, check: func(o *runcmd.Options) string { return eq("MaxRestarts", o.MaxRestarts, 3) }},
		{args: []string{"--monitor-interval", "0.5"}, check: func(o *runcmd.Options) string { return "" }},
		{args: []string{"--monitor-interval", "often"}, err: `--monitor-interval: want a number of seconds, got "often"`},
		{args: []string{"--start-method", "forkserver"}, check: func(o *runcmd.Options) string { return "" }},
		{args: []string{"--start-method", "thread"}, err: `--start-method: want spawn, fork or forkserver, got "thread"`},
		{args: []string{"--event-log-handler", "null"}, check: func(o *runcmd.Options) string { return "" }},
		{args: []string{"--event-log-handler", "console"}, check: func(o *runcmd.Options) string { return "" }, warn: "--event-log-handler does nothing under amdrun: it records no torchelastic events"},
		{args: []string{"--role", "trainer"}, check: func(o *runcmd.Options) string { return eq("Role", o.Role, "trainer") }},
		{args: []string{"-m"}, check: func(o *runcmd.Options) string { return eq("Module", o.Module, true) }},
		{args: []string{"--module"}, check: func(o *runcmd.Options) string { return eq("Module", o.Module, true) }},
		{args: []string{"--no-python"}, check: func(o *runcmd.Options) string { return eq("NoPython", o.NoPython, true) }},
		{args: []string{"--run-path", "--no-python"}, check: func(o *runcmd.Options) string { return eq("NoPython", o.NoPython, false) }},
		{args: []string{"--run-path", "-m"}, err: "--run-path and --module cannot be used together"},
		{args: []string{"--log-dir", "/tmp/logs"}, check: func(o *runcmd.Options) string { return eq("LogDir", o.LogDir, "/tmp/logs") }},
		{args: []string{"-r", "3"}, check: func(o *runcmd.Options) string {
			return eq("Redirects", o.Redirects, launch.Streams{All: launch.StdAll})
		}},
		{args: []string{"--redirects", "0:3,1:0"}, check: func(o *runcmd.Options) string {
			return eq("Redirects", o.Redirects, launch.Streams{PerRank: map[int]launch.Std{0: launch.StdAll, 1: launch.StdNone}})
		}},
		{args: []string{"-r", "5"}, err: `--redirects: "5": want 0-3`},
		{args: []string{"-t", "1"}, check: func(o *runcmd.Options) string { return eq("Tee", o.Tee, launch.Streams{All: launch.StdOut}) }},
		{args: []string{"--tee", "0:2"}, check: func(o *runcmd.Options) string {
			return eq("Tee", o.Tee, launch.Streams{PerRank: map[int]launch.Std{0: launch.StdErr}})
		}},
		{args: []string{"--local-ranks-filter", "0,1", "-n", "2"}, check: func(o *runcmd.Options) string { return eq("RanksFilter", o.RanksFilter, []int{0, 1}) }},
		{args: []string{"--duplicate-stdout-filters", "loss"}, check: func(o *runcmd.Options) string { return "" }, warn: "--duplicate-stdout-filters does nothing under amdrun"},
		{args: []string{"--duplicate-stderr-filters", "Error"}, check: func(o *runcmd.Options) string { return "" }, warn: "--duplicate-stderr-filters does nothing under amdrun"},
		{args: []string{"--node-rank", "1", "--nnodes", "2", "--master-addr", "n0", "--master-port", "29500", "-n", "8"}, check: func(o *runcmd.Options) string {
			return eq("NodeRank, NNodes, master", []any{o.NodeRank, o.NNodes, o.MasterAddr, o.MasterPort}, []any{1, 2, "n0", 29500})
		}},
		{args: []string{"--master-addr", "10.1.1.1"}, check: func(o *runcmd.Options) string { return eq("MasterAddr", o.MasterAddr, "10.1.1.1") }},
		{args: []string{"--master-port", "29501"}, check: func(o *runcmd.Options) string { return eq("MasterPort", o.MasterPort, 29501) }},
		{args: []string{"--local-addr", "10.0.0.2"}, check: func(o *runcmd.Options) string { return "" }, warn: "--local-addr does nothing under amdrun"},
		{args: []string{"--logs-specs", "mine"}, check: func(o *runcmd.Options) string { return "" }, warn: "--logs-specs does nothing under amdrun"},
		{args: []string{"--numa-binding", "node"}, check: func(o *runcmd.Options) string { return eq("Bind", o.Bind, plan.BindNUMA) }},
		{args: []string{"--numa-binding", "exclusive"}, check: func(o *runcmd.Options) string { return eq("Bind", o.Bind, plan.BindExclusive) }},
		{args: []string{"--numa-binding", "socket"}, check: func(o *runcmd.Options) string { return eq("Bind", o.Bind, plan.BindSocket) }},
		{args: []string{"--numa_binding", "core-complex"}, check: func(o *runcmd.Options) string { return eq("Bind", o.Bind, plan.BindCoreComplex) }},
		{args: []string{"--numa-binding", "core-complex", "--bind", "core-complex"}, check: func(o *runcmd.Options) string { return eq("Bind", o.Bind, plan.BindCoreComplex) }},
		{args: []string{"--numa-binding", "ccd"}, err: "--numa-binding: want node, socket, exclusive or core-complex, got \"ccd\""},
		{args: []string{"--numa-binding", "node", "--bind", "none"}, err: "--numa-binding node and --bind none disagree"},
		{args: []string{"--signals-to-handle", "SIGTERM,SIGINT,SIGUSR1"}, check: func(o *runcmd.Options) string {
			return eq("Forward", o.Forward, []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1})
		}},
		{args: []string{"--signals-to-handle", "term, cont,SIGTERM"}, check: func(o *runcmd.Options) string {
			return eq("Forward", o.Forward, []os.Signal{syscall.SIGTERM, syscall.SIGCONT})
		}},
		{args: []string{"--signals-to-handle", "SIGTERM,SIGNOPE"}, err: "--signals-to-handle: SIGNOPE is not a signal"},
		{args: []string{"--signals-to-handle", "SIGKILL"}, err: "--signals-to-handle: SIGKILL cannot be forwarded"},
		{args: []string{"--signals-to-handle", " , "}, err: "--signals-to-handle: empty list of signals"},
		{args: []string{"--shutdown-timeout", "5"}, check: func(o *runcmd.Options) string { return eq("Grace", o.Grace, 5*time.Second) }},
		{args: []string{"--shutdown-timeout", "5", "--grace", "3s"}, err: "--shutdown-timeout and --grace say the same thing"},
		{args: []string{"--virtual-local-rank"}, check: func(o *runcmd.Options) string { return eq("VirtualLocalRank", o.VirtualLocalRank, true) }},
		// --launcher torchrun passes torchrun's own flags on, in the
		// underscore spelling every torchrun accepts, in flagTable's order.
		{args: append([]string{"--role", "r", "--monitor-interval", "1", "--start-method", "fork", "--event-log-handler", "console",
			"--log-dir", "/l", "-r", "3", "-t", "0:1", "--local-ranks-filter", "0", "--local-addr", "a", "--logs-specs", "s",
			"--numa-binding", "node", "--signals-to-handle", "SIGTERM", "--shutdown-timeout", "4", "--duplicate-stdout-filters", "x",
			"--duplicate-stderr-filters", "y", "--run-path", "--virtual-local-rank"}, tr...), check: func(o *runcmd.Options) string {
			return eq("TorchrunArgs", strings.Join(o.TorchrunArgs, " "), "--log_dir /l --local_ranks_filter 0 --role r "+
				"--virtual_local_rank --run_path --redirects 3 --tee 0:1 --shutdown_timeout 4 --numa_binding node "+
				"--signals_to_handle SIGTERM --monitor_interval 1 --start_method fork --event_log_handler console "+
				"--local_addr a --logs_specs s --duplicate_stdout_filters x --duplicate_stderr_filters y")
		}},
	}
}

// underscored spells args' long flags as torch 1.13 does.
func underscored(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.HasPrefix(a, "--") {
			a = "--" + strings.ReplaceAll(a[2:], "-", "_")
		}
		out[i] = a
	}
	return out
}

// TestTorchrunFlags feeds every torchrun flag, in both spellings.
func TestTorchrunFlags(t *testing.T) {
	fed := map[string]bool{}
	for _, tc := range torchrunCases() {
		for _, args := range [][]string{tc.args, underscored(tc.args)} {
			for _, a := range args {
				fed[strings.ReplaceAll(a, "_", "-")] = true
			}
			f := newFactory(t)
			var warned []string
			f.Warn = func(format string, a ...any) { warned = append(warned, fmt.Sprintf(format, a...)) }
			o, err := parse(t, f, append(args, "t.py")...)
			if tc.warn != "" && (len(warned) != 1 || !strings.Contains(warned[0], tc.warn)) {
				t.Errorf("%q: warnings %q, want one containing %q", args, warned, tc.warn)
			}
			if tc.err != "" {
				var fe *cmdutil.FlagError
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &fe) || strings.Contains(err.Error(), "\n") {
					t.Errorf("%q: error %v, want a one-line usage error containing %q", args, err, tc.err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%q: %v", args, err)
				continue
			}
			if msg := tc.check(o); msg != "" {
				t.Errorf("%q: %s", args, msg)
			}
		}
	}
	for _, name := range torchrunOptions {
		if !fed[name] {
			t.Errorf("torchrun's %s is fed by no case", name)
		}
	}
}

// TestTorchrunPETVariables: each flag torchrun reads from PET_<NAME> is
// read from it too; a flag on the command line wins; a boolean is a
// number, as torchrun's check_env reads it.
func TestTorchrunPETVariables(t *testing.T) {
	for _, tc := range []struct {
		env   []string
		args  []string
		check func(o *runcmd.Options) bool
		err   string
	}{
		{env: []string{"PET_NPROC_PER_NODE=4"}, check: func(o *runcmd.Options) bool { return o.Ranks.N == 4 && o.Ranks.GPUs == 4 }},
		{env: []string{"PET_NPROC_PER_NODE=4"}, args: []string{"--nproc_per_node", "2"}, check: func(o *runcmd.Options) bool { return o.Ranks.N == 2 }},
		{env: []string{"PET_NNODES=2", "PET_NODE_RANK=1", "PET_MASTER_ADDR=n0", "PET_MASTER_PORT=29400", "PET_NPROC_PER_NODE=8"},
			check: func(o *runcmd.Options) bool {
				return o.NNodes == 2 && o.NodeRank == 1 && o.MasterAddr == "n0" && o.MasterPort == 29400 && o.Ranks.GPUs == 8
			}},
		{env: []string{"PET_STANDALONE=1"}, check: func(o *runcmd.Options) bool { return o.MasterPort == 0 }},
		{env: []string{"PET_MODULE=1"}, check: func(o *runcmd.Options) bool { return o.Module }},
		{env: []string{"PET_MODULE=0"}, check: func(o *runcmd.Options) bool { return !o.Module }},
		{env: []string{"PET_NO_PYTHON=1"}, check: func(o *runcmd.Options) bool { return o.NoPython }},
		{env: []string{"PET_MAX_RESTARTS=2", "PET_ROLE=r", "PET_RDZV_ID=j", "PET_LOG_DIR=/l", "PET_LOCAL_RANKS_FILTER="},
			check: func(o *runcmd.Options) bool {
				return o.MaxRestarts == 2 && o.Role == "r" && o.RunID == "j" && o.LogDir == "/l" && o.RanksFilter == nil
			}},
		{env: []string{"PET_REDIRECTS=3", "PET_TEE=0:1"}, check: func(o *runcmd.Options) bool {
			return o.Redirects.All == launch.StdAll && o.Tee.For(0) == launch.StdOut
		}},
		{env: []string{"PET_SHUTDOWN_TIMEOUT=7", "PET_VIRTUAL_LOCAL_RANK=1"}, check: func(o *runcmd.Options) bool {
			return o.Grace == 7*time.Second && o.VirtualLocalRank
		}},
		{env: []string{"PET_STANDALONE=yes"}, err: `PET_STANDALONE: want a number (0 off, 1 on, as torchrun reads it), got "yes"`},
		{env: []string{"PET_MAX_RESTARTS=many"}, err: `PET_MAX_RESTARTS: want a whole number, got "many"`},
		{env: []string{"PET_NPROC_PER_NODE=lots"}, err: `PET_NPROC_PER_NODE: want a number of ranks`},
		{env: []string{"PET_LOCAL_ADDR=a"}, check: func(o *runcmd.Options) bool { return true }},
		{env: []string{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT=42"}, check: func(o *runcmd.Options) bool { return o.Grace == 42*time.Second }},
		{env: []string{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT=42"}, args: []string{"--shutdown-timeout", "3"}, check: func(o *runcmd.Options) bool { return o.Grace == 3*time.Second }},
		{env: []string{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT=42"}, args: []string{"--grace", "2s"}, check: func(o *runcmd.Options) bool { return o.Grace == 2*time.Second }},
		{env: []string{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT=soon"}, err: `TORCH_ELASTIC_SHUTDOWN_TIMEOUT: want a whole number of seconds (as torchrun reads it), got "soon"`},
		{env: []string{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE=[$role_name$rank]: "}, check: func(o *runcmd.Options) bool {
			return o.PrefixTemplate == "[$role_name$rank]: "
		}},
	} {
		f := newFactory(t, tc.env...)
		o, err := parse(t, f, append(tc.args, "t.py")...)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q %q: error %v, want one containing %q", tc.env, tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q %q: %v", tc.env, tc.args, err)
			continue
		}
		if !tc.check(o) {
			t.Errorf("%q %q: options not as PET_* said: %+v", tc.env, tc.args, o)
		}
	}
}
