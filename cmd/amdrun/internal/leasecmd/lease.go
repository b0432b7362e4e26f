// Package leasecmd is `amdrun lease init`: root prepares the lease
// directory so that no user takes another's devices (docs/shared-nodes.md).
package leasecmd

import (
	"context"
	"fmt"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/iostreams"
	"github.com/amdrun/amdrun/internal/lease"
	"github.com/amdrun/amdrun/internal/topology"
	"github.com/spf13/cobra"
)

// InitOptions are the inputs of `amdrun lease init`.
type InitOptions struct {
	IO       *iostreams.IOStreams
	Topology func(context.Context) (*topology.Model, error)
	// Dir is the lease directory to prepare, resolved (Factory.LeaseDir).
	Dir string
	// Tmpfiles prints systemd-tmpfiles.d lines instead of preparing.
	Tmpfiles bool
	// HostNUMA returns the host's NUMA nodes, whose CPUs get a lock file
	// each; nil or an error: none.
	HostNUMA func() ([]topology.NUMANode, error)
}

// NewCmdLease returns `amdrun lease` and `init`; runF replaces RunInit.
func NewCmdLease(f *cmdutil.Factory, runF func(context.Context, *InitOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lease",
		Short: "Manage the node's device lease directory",
		Args:  cobra.NoArgs,
	}
	opts := &InitOptions{IO: f.IOStreams, Topology: f.Topology, HostNUMA: f.HostNUMA}
	var dir string
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Prepare the lease directory as root, so no user takes others' GPUs",
		Long: `Make the lease directory root-prepared: owned by root and writable by nobody
else, with a lock file per device and per CPU of this node made once by root (jobs lock
them through read-only descriptors), the node lock and the waiting queue.
There no user can remove or replace a lease file, so no job can take a device
another job holds. Run it as root once per boot (/run is emptied at boot), or
install its systemd-tmpfiles.d lines (--tmpfiles). It is safe to run again: it
only builds. It makes the directory when nothing is there and adopts one it
made before, or the one jobs made before it ran (the degraded mode) when that
holds only amdrun's own files and no job runs or waits there: it becomes
root's, and the files other users' jobs made are replaced by root's. Anything
else at the path (a file, a link, a directory holding other files) is refused,
named with its owner and mode, and left as it is.`,
		Example: `  sudo amdrun lease init
  sudo amdrun lease init --lease-dir /srv/amdrun/leases
  amdrun lease init --tmpfiles | sudo tee /etc/tmpfiles.d/amdrun-devices.conf`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Dir = f.LeaseDir(dir)
			return cmdutil.Either(runF, RunInit)(cmd.Context(), opts)
		},
	}
	initCmd.Flags().StringVar(&dir, "lease-dir", "", "lease directory to prepare (default $AMDRUN_LEASE_DIR, else /run/lock/amdrun)")
	initCmd.Flags().BoolVar(&opts.Tmpfiles, "tmpfiles", false, "print systemd-tmpfiles.d lines that prepare it at boot, instead of preparing it")
	cmd.AddCommand(initCmd)
	return cmd
}

// RunInit prepares the directory (lease.Init) for this node's devices
// and CPUs, or prints the tmpfiles.d lines that would.
func RunInit(ctx context.Context, o *InitOptions) error {
	if !o.Tmpfiles {
		// Before discovery: a user learns at once that this is root's job.
		if err := lease.CanInit(); err != nil {
			return err
		}
	}
	m, err := o.Topology(ctx)
	if err != nil {
		return err
	}
	var cpus []int
	if o.HostNUMA != nil {
		if nodes, err := o.HostNUMA(); err == nil {
			for _, n := range nodes {
				cpus = append(cpus, n.CPUs...)
			}
		}
	}
	keys := append(m.Keys(), lease.CPUKeys(cpus)...)
	if o.Tmpfiles {
		lines, err := lease.TmpfilesLines(o.Dir, keys)
		if err != nil {
			return err
		}
		fmt.Fprintf(o.IO.Out, "# amdrun lease init --tmpfiles: the lease directory for the %d devices and %d CPUs of this node\n", len(keys)-len(cpus), len(cpus))
		for _, l := range lines {
			fmt.Fprintln(o.IO.Out, l)
		}
		return nil
	}
	rep, err := lease.Init(o.Dir, keys)
	if err != nil {
		return err
	}
	if rep.Adopted != "" {
		fmt.Fprintf(o.IO.Out, "%s: %s\n", rep.Path, rep.Adopted)
	}
	devs, newCPUs := countMade(rep.Made)
	fmt.Fprintf(o.IO.Out, "%s is root-prepared: node lock, queue, %d device lock files (%d new), %d CPU lock files (%d new)\n",
		rep.Path, len(keys)-len(cpus), devs, len(cpus), newCPUs)
	return nil
}

// countMade counts the device and CPU lock files among made.
func countMade(made []string) (devices, cpus int) {
	for _, m := range made {
		if k, ok := lease.KeyFromFileName(m); ok {
			if _, isCPU := lease.CPUOfKey(k); isCPU {
				cpus++
			} else {
				devices++
			}
		}
	}
	return devices, cpus
}
