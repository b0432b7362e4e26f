package cmdutil

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/iostreams"
	"github.com/amdrun/amdrun/internal/bench"
	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/topology"
	"github.com/amdrun/amdrun/internal/topology/host"
)

// TopoFlags are the root's persistent flags that say where the topology
// comes from. Commands read them through Factory.Topology.
type TopoFlags struct {
	Source    string
	SysfsRoot string
	File      string
	// Bandwidth is auto, measured or theoretical (see applyMeasured).
	Bandwidth string
}

// Factory holds what commands depend on. Costly members are lazy funcs,
// so `--help` and flag errors never probe hardware.
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
	Now        func() time.Time

	// HostNUMA returns this host's NUMA nodes; tests replace it.
	HostNUMA func() ([]topology.NUMANode, error)

	// Run runs external programs (vendor tools, python); tests replace it.
	Run topology.Runner

	// Discover is the discovery function; tests replace it.
	Discover func(ctx context.Context, o discover.Options) (*topology.Model, error)

	once  sync.Once
	model *topology.Model
	err   error
}

// Topology discovers the node once, with the root's topology flags.
func (f *Factory) Topology(ctx context.Context) (*topology.Model, error) {
	f.once.Do(func() {
		sysfs := f.Topo.SysfsRoot
		if sysfs == "" {
			sysfs = f.Getenv("AMDRUN_SYSFS_ROOT")
		}
		f.model, f.err = f.Discover(ctx, discover.Options{
			Source: f.Topo.Source, SysfsRoot: sysfs, File: f.Topo.File, Warn: f.Warn,
		})
		if f.err == nil {
			f.err = f.applyMeasured(f.model)
		}
	})
	return f.model, f.err
}

// Getenv looks key up in Env.
func (f *Factory) Getenv(key string) string {
	for _, kv := range f.Env() {
		if len(kv) > len(key) && kv[len(key)] == '=' && kv[:len(key)] == key {
			return kv[len(key)+1:]
		}
	}
	return ""
}

// New returns the Factory of the real process.
func New(version string) *Factory {
	io := iostreams.System()
	f := &Factory{
		IOStreams:  io,
		Version:    version,
		Env:        os.Environ,
		Executable: os.Executable,
		Now:        time.Now,
		Discover:   discover.Discover,
		Run:        discover.ExecRunner,
	}
	f.HostNUMA = func() ([]topology.NUMANode, error) {
		root := f.Topo.SysfsRoot
		if root == "" {
			root = f.Getenv("AMDRUN_SYSFS_ROOT")
		}
		if root == "" {
			root = "/"
		}
		return host.NUMANodes(root)
	}
	f.Warn = func(format string, args ...any) {
		Warnf(io, format, args...)
	}
	return f
}

// applyMeasured replaces theoretical bandwidths with the cached amdrun
// bench result for exactly these devices: always under "measured" (an
// error when there is none), when one exists under "auto".
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
