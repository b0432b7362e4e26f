// Package doctor is `amdrun doctor`: a checklist of what decides how well
// a multi-GPU job runs on this node, each OK, WARN or FAIL with advice.
package doctor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/iostreams"
	"github.com/amdrun/amdrun/internal/envlist"
	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/lease"
	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/printable"
	"github.com/amdrun/amdrun/internal/topology"
)

// Status of one check.
type Status string

// Statuses, from good to bad.
const (
	OK   Status = "OK"
	Warn Status = "WARN"
	Fail Status = "FAIL"
)

// Check is one line of the checklist.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Advice string `json:"advice,omitempty"`
}

// Options are the inputs of `amdrun doctor`.
type Options struct {
	IO       *iostreams.IOStreams
	Topology func(context.Context) (*topology.Model, error)
	Env      func() []string
	// Root is the directory /proc and /sys are read under ("/" normally).
	Root   string
	Leases func() (*lease.Dir, error)
	// Run runs python to ask torch which devices it sees.
	Run      topology.Runner
	HostNUMA func() ([]topology.NUMANode, error)
	// Python is the interpreter to check, resolved (Factory.PythonFrom);
	// PythonFrom names the rule that chose it ("" leaves it unsaid).
	Python, PythonFrom string
	JSON               bool
	// Self is amdrun's own path, for the PATH check; nil leaves it out.
	Self func() (string, error)
	// Containment probes how a job is contained here; nil leaves it out.
	Containment func() (launch.Containment, error)
}

// NewCmdDoctor returns `amdrun doctor`.
func NewCmdDoctor(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Topology: f.Topology, Env: f.Env, Run: f.Run, HostNUMA: f.HostNUMA, Self: f.Executable,
		Containment: func() (launch.Containment, error) {
			self, err := f.Executable()
			if err != nil {
				return launch.ContainSubreaper, err
			}
			return launch.ProbeContainment(self)
		}}
	var leaseDir string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check this node for what affects multi-GPU jobs (OK / WARN / FAIL)",
		Long: `Check the topology source and its version, the devices and busy ones,
visible-device variables already set (and whether ROCR and HIP conflict),
NUMA balancing, NUMA nodes and where each device sits, the IOMMU mode
(AMD advises iommu=pt for Instinct GPUs), leases held by amdrun jobs, how
a job is contained (so that nothing it starts outlives it), and whether
python3 and torch are found and which devices torch sees.
Exits 0 when no check fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Root = f.SysfsRoot()
			opts.Python, opts.PythonFrom = f.PythonFrom(opts.Python)
			// The lease check reports the degraded mode, makes no directory.
			opts.Leases = func() (*lease.Dir, error) { return lease.Open(f.LeaseDir(leaseDir), lease.Options{}) }
			return cmdutil.Either(runF, Run)(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the checks as JSON")
	cmd.Flags().StringVar(&opts.Python, "python", "", "Python interpreter to check (default $PYTHON_EXEC, else $VIRTUAL_ENV/bin/python, $CONDA_PREFIX/bin/python, else python3)")
	cmd.Flags().StringVar(&leaseDir, "lease-dir", "", "lease directory (default $AMDRUN_LEASE_DIR, else /run/lock/amdrun)")
	return cmd
}

// Run prints the checks; it returns ErrSilent when one failed.
func Run(ctx context.Context, o *Options) error {
	checks := Checks(ctx, o)
	failed := slices.ContainsFunc(checks, func(c Check) bool { return c.Status == Fail })
	if o.JSON {
		if err := cmdutil.PrintJSON(o.IO.Out, map[string]any{"checks": checks, "ok": !failed}); err != nil {
			return err
		}
	} else {
		for _, c := range checks {
			fmt.Fprintf(o.IO.Out, "[%-4s] %-22s %s\n", c.Status, c.Name, c.Detail)
			if c.Advice != "" {
				fmt.Fprintf(o.IO.Out, "       %-22s -> %s\n", "", c.Advice)
			}
		}
	}
	if failed {
		return cmdutil.ErrSilent
	}
	return nil
}

// Checks runs every check in order.
func Checks(ctx context.Context, o *Options) []Check {
	var out []Check
	m, err := o.Topology(ctx)
	if err != nil {
		out = append(out, Check{"topology source", Fail, err.Error(), "install amd-smi/rocm-smi (ROCm) or nvidia-smi, or check that the amdgpu/nvidia driver is loaded"})
	} else {
		v := strings.TrimSuffix(m.Source+" "+m.SourceVersion, " ")
		out = append(out, Check{"topology source", OK, v, ""}, devicesCheck(m), numaCheck(m, o.HostNUMA))
	}
	out = append(out, visibleCheck(o.Env(), m), balancingCheck(o.Root))
	if m != nil {
		out = append(out, iommuCheck(o.Root, m.Vendor), leaseCheck(o, m))
	}
	if o.Containment != nil {
		out = append(out, containmentChecks(o.Containment)...)
	}
	if o.Self != nil {
		out = append(out, pathCheck(envlist.Get(o.Env(), "PATH"), o.Self))
	}
	return append(out, torchCheck(ctx, o))
}

// pathCheck warns when the amdrun a shell would run is another program:
// optimum-amd's `pip install optimum[amd]` installs a console script also
// named amdrun (issue 22).
func pathCheck(path string, self func() (string, error)) Check {
	me, err := self()
	if err != nil {
		return Check{"amdrun on PATH", Warn, fmt.Sprintf("cannot tell which amdrun runs: %v", err), ""}
	}
	first := firstOnPath(path, "amdrun")
	if first == "" {
		return Check{"amdrun on PATH", OK, me + " (not on PATH)", ""}
	}
	a, errA := os.Stat(first)
	b, errB := os.Stat(me)
	if errA == nil && errB == nil && os.SameFile(a, b) {
		return Check{"amdrun on PATH", OK, first, ""}
	}
	return Check{"amdrun on PATH", Warn, fmt.Sprintf("%s comes first on PATH, not this amdrun (%s)", first, me),
		"optimum-amd (pip install optimum[amd]) installs a script also called amdrun; '" + first + " version' prints 'amdrun VERSION (goN, OS/ARCH)' only for this one; put " + filepath.Dir(me) + " earlier on PATH or call it by its path"}
}

// firstOnPath is the program name as a shell finds it in path ("": none).
func firstOnPath(path, name string) string {
	for _, dir := range filepath.SplitList(path) {
		dir = cmp.Or(dir, ".")
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// containmentChecks say how --contain auto contains a job (docs/supervision.md).
func containmentChecks(probe func() (launch.Containment, error)) []Check {
	c, err := probe()
	lines := c.Lines(err)
	if lines == nil {
		return []Check{{"containment", Warn, fmt.Sprintf("cannot tell: %v", err), ""}}
	}
	out := make([]Check, len(lines))
	for i, l := range lines {
		out[i] = Check{l.Name, OK, l.Detail, l.Hint}
	}
	return out
}

func devicesCheck(m *topology.Model) Check {
	var busy []string
	for _, d := range m.Devices {
		if d.Busy {
			busy = append(busy, fmt.Sprintf("%d (%s)", d.Index, d.BusyReason))
		}
	}
	detail := fmt.Sprintf("%d devices", m.N())
	if len(busy) == 0 {
		return Check{"devices", OK, detail + ", none busy", ""}
	}
	return Check{"devices", Warn, detail + ", busy: " + strings.Join(busy, ", "),
		"amdrun leaves busy devices out unless --allow-busy; see amdrun ps"}
}

func numaCheck(m *topology.Model, hostNUMA func() ([]topology.NUMANode, error)) Check {
	hostNodes := len(m.NUMANodes)
	if hostNUMA != nil {
		if nodes, err := hostNUMA(); err == nil {
			hostNodes = len(nodes)
		}
	}
	by := map[int][]string{}
	for _, d := range m.Devices {
		by[d.NUMANode] = append(by[d.NUMANode], fmt.Sprint(d.Index))
	}
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(by)) {
		name := fmt.Sprintf("node %d", id)
		if id < 0 {
			name = "unknown node"
		}
		parts = append(parts, fmt.Sprintf("%s: GPU %s", name, strings.Join(by[id], ",")))
	}
	detail := fmt.Sprintf("%d host NUMA node(s); %s", hostNodes, strings.Join(parts, "; "))
	if _, unknown := by[-1]; unknown {
		return Check{"NUMA placement", Warn, detail, "some devices report no NUMA node: ranks on them are not bound"}
	}
	return Check{"NUMA placement", OK, detail, ""}
}

func visibleCheck(env []string, m *topology.Model) Check {
	var parts []string
	for _, k := range []string{plan.EnvCUDAVisible, plan.EnvHIPVisible, plan.EnvROCRVisible} {
		if v, ok := envlist.Lookup(env, k); ok {
			parts = append(parts, k+"="+v)
		}
	}
	if len(parts) == 0 {
		return Check{"visible devices", OK, "no CUDA_/HIP_/ROCR_VISIBLE_DEVICES set", ""}
	}
	detail := strings.Join(parts, " ")
	_, rocr := envlist.Lookup(env, plan.EnvROCRVisible)
	_, hip := envlist.Lookup(env, plan.EnvHIPVisible)
	if m != nil {
		// As a launch checks: a mask that names no device fails.
		if _, err := plan.ParseMask(env, m.Devices); err != nil {
			return Check{"visible devices", Fail, detail + ": " + err.Error(),
				"fix or unset these variables: every amdrun launch here refuses them"}
		}
	}
	if rocr && hip {
		return Check{"visible devices", Warn, detail,
			"ROCR_VISIBLE_DEVICES applies first and HIP_VISIBLE_DEVICES then indexes into what is left: unset one"}
	}
	return Check{"visible devices", OK, detail + " (amdrun chooses among these)", ""}
}

func balancingCheck(root string) Check {
	b, err := os.ReadFile(filepath.Join(root, "proc/sys/kernel/numa_balancing"))
	if err != nil {
		return Check{"NUMA balancing", OK, "not supported by this kernel", ""}
	}
	v := strings.TrimSpace(string(b))
	if v == "0" {
		return Check{"NUMA balancing", OK, "off (kernel.numa_balancing = 0)", ""}
	}
	return Check{"NUMA balancing", Warn, "on (kernel.numa_balancing = " + v + ")",
		"benchmark with it on and off; amdrun --numa-balancing off sets it for one job"}
}

func iommuCheck(root string, v topology.Vendor) Check {
	b, err := os.ReadFile(filepath.Join(root, "proc/cmdline"))
	if err != nil {
		return Check{"IOMMU", Warn, "cannot read /proc/cmdline: " + err.Error(), ""}
	}
	mode := "default (no iommu= on the kernel command line)"
	pt := false
	for _, f := range strings.Fields(string(b)) {
		if strings.HasPrefix(f, "iommu=") || strings.HasPrefix(f, "amd_iommu=") || strings.HasPrefix(f, "intel_iommu=") {
			mode = f
			pt = pt || f == "iommu=pt"
		}
	}
	if v == topology.VendorAMD && !pt {
		return Check{"IOMMU", Warn, mode, "AMD advises iommu=pt on the kernel command line for Instinct GPUs"}
	}
	return Check{"IOMMU", OK, mode, ""}
}

func leaseCheck(o *Options, m *topology.Model) Check {
	const initAdvice = "ask root to run 'amdrun lease init' (docs/shared-nodes.md)"
	d, err := o.Leases()
	if err != nil {
		return Check{"leases", Warn, err.Error(), initAdvice + ", or set --lease-dir or AMDRUN_LEASE_DIR to a directory every user of the node shares"}
	}
	defer d.Close()
	if d.Owner() < 0 {
		return Check{"leases", Warn, d.Path() + " does not exist yet: the first job makes it writable by every user (degraded mode)", initAdvice}
	}
	keys := m.Keys()
	held, err := d.Held(keys)
	if err != nil {
		return Check{"leases", Warn, err.Error(), ""}
	}
	var leased, faults []string
	for i, k := range keys {
		s, ok := held[k]
		switch {
		case !ok:
		case s.Fault != nil:
			faults = append(faults, fmt.Sprintf("GPU %d unusable (%s)", i, printable.String(s.Fault.Error(), 200)))
		default:
			who := cmp.Or(s.Holder.User, "an unknown user")
			leased = append(leased, fmt.Sprintf("GPU %d by %s pid %d", i, who, s.Holder.PID))
		}
	}
	mode := "root-prepared"
	if d.Owner() != 0 || d.Mode() != lease.Owned {
		mode = fmt.Sprintf("%s, owner uid %d", d.Mode(), d.Owner())
	}
	detail := fmt.Sprintf("%s (%s): %s", d.Path(), mode, cmp.Or(strings.Join(leased, ", "), "no device leased"))
	switch {
	case d.Degraded() != "":
		return Check{"leases", Warn, d.Degraded() + "; " + detail, initAdvice}
	case len(faults) > 0:
		return Check{"leases", Warn, detail + "; " + strings.Join(faults, "; "),
			"the owner of each file named removes it (or root does); until then that device is left out"}
	case len(leased) > 0:
		return Check{"leases", OK, detail, "amdrun ps shows them"}
	}
	return Check{"leases", OK, detail, ""}
}

// torchProbe prints torch's version and how many devices it sees.
const torchProbe = `import torch
n = torch.cuda.device_count() if torch.cuda.is_available() else 0
hip = getattr(torch.version, "hip", None)
print(torch.__version__, "hip" if hip else ("cuda" if torch.version.cuda else "cpu"), n)`

func torchCheck(ctx context.Context, o *Options) Check {
	py := o.Python
	if o.PythonFrom != "" {
		py += " (" + o.PythonFrom + ")"
	}
	out, err := o.Run(ctx, o.Python, "-c", torchProbe)
	if err != nil {
		why := err.Error()
		var te *topology.ToolError
		if errors.As(err, &te) {
			why = fmt.Sprintf("exit status %d", te.ExitCode)
			if lines := strings.Split(strings.TrimSpace(te.Stderr), "\n"); lines[len(lines)-1] != "" {
				why += ": " + lines[len(lines)-1]
			}
		}
		return Check{"python + torch", Warn, fmt.Sprintf("%s cannot import torch (%s)", py, why), "install PyTorch for this python, or give --python / PYTHON_EXEC"}
	}
	f := strings.Fields(string(out))
	if len(f) != 3 {
		return Check{"python + torch", Warn, strings.TrimSpace(string(out)), ""}
	}
	detail := fmt.Sprintf("%s: torch %s (%s build) sees %s device(s)", py, f[0], f[1], f[2])
	if f[2] == "0" {
		return Check{"python + torch", Warn, detail, "this torch sees no GPU: a CPU-only build, or the driver is not loaded"}
	}
	return Check{"python + torch", OK, detail, ""}
}
