package cmdutil

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/iostreams"
	"github.com/amdrun/amdrun/internal/bench"
	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/envlist"
	"github.com/amdrun/amdrun/internal/lease"
	"github.com/amdrun/amdrun/internal/topology"
	"github.com/amdrun/amdrun/internal/topology/host"
)

// TopoFlags are the root's flags that say where the topology comes from
// (--source, --sysfs-root, --topology, --bandwidth); "": the default.
type TopoFlags struct {
	Source    string
	SysfsRoot string
	File      string
	Bandwidth string
}

// Factory holds what commands depend on, costly members as lazy funcs so
// that `--help` never probes hardware; it alone resolves configuration
// (flag, then environment, then default).
type Factory struct {
	IOStreams *iostreams.IOStreams
	Version   string
	Topo      TopoFlags
	// Warn prints a warning line on stderr ("amdrun: warning: ...").
	Warn topology.Warner
	// Env returns amdrun's environment (KEY=VAL).
	Env func() []string
	// Executable is amdrun's own path (for the bind shim).
	Executable func() (string, error)

	// HostNUMA returns this host's NUMA nodes.
	HostNUMA func() ([]topology.NUMANode, error)
	// HostCPUGroups returns the sockets and L3 caches of nodes' CPUs.
	HostCPUGroups func(nodes []topology.NUMANode) (*topology.CPUGroups, error)
	// OwnCPUs returns the CPUs amdrun may use; nil means its own affinity.
	OwnCPUs func() []int

	// Run runs external programs (vendor tools, python).
	Run topology.Runner

	Discover func(ctx context.Context, o discover.Options) (*topology.Model, error)

	once  sync.Once
	model *topology.Model
	err   error
}

// Getenv looks key up in Env, the last assignment winning (envlist.Get).
func (f *Factory) Getenv(key string) string {
	return envlist.Get(f.Env(), key)
}

// SysfsRoot is the directory sysfs and /proc are read under:
// --sysfs-root, else $AMDRUN_SYSFS_ROOT, else "/".
func (f *Factory) SysfsRoot() string {
	return cmp.Or(f.Topo.SysfsRoot, f.Getenv("AMDRUN_SYSFS_ROOT"), "/")
}

// LeaseDir is the --lease-dir flag's directory: flag, else
// $AMDRUN_LEASE_DIR, else lease.DefaultDir (no private fallback: jobs
// there would not see each other's leases).
func (f *Factory) LeaseDir(flag string) string {
	return cmp.Or(flag, f.Getenv("AMDRUN_LEASE_DIR"), lease.DefaultDir)
}

// OpenLeases opens LeaseDir(flag), warning through f.Warn. create makes a
// missing directory (jobs); without it (ps, dry runs) a missing directory
// holds no lease.
func (f *Factory) OpenLeases(flag string, create bool) (*lease.Dir, error) {
	return lease.Open(f.LeaseDir(flag), lease.Options{Warn: f.Warn, Create: create})
}

// PythonFrom is the interpreter a command's --python flag value names, the
// one rule for ranks, doctor and bench (issue 22), and the rule that chose
// it. An activated environment comes before PATH: its user means its
// interpreter even behind a pyenv shim.
func (f *Factory) PythonFrom(flag string) (path, from string) {
	if flag != "" {
		return flag, "--python"
	}
	if p := f.Getenv("PYTHON_EXEC"); p != "" {
		return p, "$PYTHON_EXEC"
	}
	for _, env := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if d := f.Getenv(env); d != "" {
			return filepath.Join(d, "bin", "python"), "$" + env
		}
	}
	if p, from := f.InstalledPython(); p != "" {
		return p, from
	}
	return "python3", "PATH"
}

// InstalledPython is the interpreter amdrun was installed with: the one
// the wheel's `python -m amdrun` ran ($AMDRUN_FROM_PYTHON), else the
// python beside amdrun's binary in a virtual or conda environment's bin.
func (f *Factory) InstalledPython() (path, from string) {
	if p := f.Getenv("AMDRUN_FROM_PYTHON"); p != "" {
		return p, "python -m amdrun"
	}
	var self string
	if f.Executable != nil {
		self, _ = f.Executable()
	}
	bin := filepath.Dir(self)
	for _, mark := range []string{"pyvenv.cfg", "conda-meta"} {
		if fileExists(filepath.Join(bin, "..", mark)) && fileExists(filepath.Join(bin, "python")) && self != "" {
			return filepath.Join(bin, "python"), "beside amdrun, in " + filepath.Dir(bin)
		}
	}
	return "", ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// ToolTimeout bounds a vendor tool run: $AMDRUN_TOOL_TIMEOUT, else
// discover.ToolTimeout.
func (f *Factory) ToolTimeout() time.Duration {
	return discover.TimeoutFromEnv(f.Getenv("AMDRUN_TOOL_TIMEOUT"))
}

// Topology discovers the node once, with the root's topology flags.
func (f *Factory) Topology(ctx context.Context) (*topology.Model, error) {
	f.once.Do(func() {
		f.model, f.err = f.Discover(ctx, f.discoverOptions(f.Warn))
		if f.err == nil {
			f.err = f.applyMeasured(f.model)
		}
	})
	return f.model, f.err
}

// Rediscover discovers the node again, for its busy state now: not
// cached, no measured bandwidth, no warnings (the first discovery gave them).
func (f *Factory) Rediscover(ctx context.Context) (*topology.Model, error) {
	return f.Discover(ctx, f.discoverOptions(nil))
}

func (f *Factory) discoverOptions(warn topology.Warner) discover.Options {
	return discover.Options{Source: f.Topo.Source, SysfsRoot: f.SysfsRoot(), File: f.Topo.File, Run: f.Run, Warn: warn}
}

// New returns the Factory of the real process.
func New(version string) *Factory {
	io := iostreams.System()
	f := &Factory{IOStreams: io, Version: version, Env: os.Environ, Executable: os.Executable, Discover: discover.Discover}
	f.Run = func(ctx context.Context, name string, args ...string) ([]byte, error) {
		return discover.RunTool(ctx, f.ToolTimeout(), name, args...)
	}
	f.HostNUMA = func() ([]topology.NUMANode, error) { return host.NUMANodes(f.SysfsRoot()) }
	f.HostCPUGroups = func(nodes []topology.NUMANode) (*topology.CPUGroups, error) {
		return host.CPUGroups(f.SysfsRoot(), nodes)
	}
	f.Warn = func(format string, args ...any) { Warnf(io, format, args...) }
	return f
}

// applyMeasured replaces theoretical bandwidths with the cached amdrun
// bench result for these devices: under "measured" (an error when there
// is none) and, when one exists, under "auto".
func (f *Factory) applyMeasured(m *topology.Model) error {
	mode := f.Topo.Bandwidth
	if mode == "theoretical" || m.Bandwidth == "measured" {
		return nil
	}
	keys := m.Keys()
	dir, err := bench.CacheDir(f.Getenv)
	var r *bench.Result
	if err == nil {
		host, _ := os.Hostname()
		r, err = bench.Load(bench.CachePath(dir, host, keys), keys)
	}
	if err != nil {
		if mode == "measured" {
			return err
		}
		f.Warn.Warn("%v (using theoretical bandwidth)", err)
		return nil
	}
	if r == nil {
		if mode == "measured" {
			return fmt.Errorf("--bandwidth measured: no amdrun bench result for these devices on this host: run amdrun bench first")
		}
		return nil
	}
	return bench.Apply(m, r)
}
