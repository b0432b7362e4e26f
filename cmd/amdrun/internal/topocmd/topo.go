// Package topocmd is `amdrun topo`: the node's devices and links.
package topocmd

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/iostreams"
	"github.com/amdrun/amdrun/internal/topology"
	"github.com/amdrun/amdrun/internal/topology/pci"
	"github.com/amdrun/amdrun/internal/topology/rbt"
	"github.com/spf13/cobra"
)

// Options are the inputs of `amdrun topo`.
type Options struct {
	IO       *iostreams.IOStreams
	Topology func(context.Context) (*topology.Model, error)
	// Measured, when set, replaces the theoretical bandwidths (--measured).
	Measured func(*topology.Model) error
	// Names, when set, names nameless devices from the PCI ID database.
	Names func(*topology.Model)

	JSON bool
}

// NewCmdTopo returns `amdrun topo`; runF replaces Run in tests.
func NewCmdTopo(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Topology: f.Topology}
	if f.Topo.File == "" && f.Topo.Source != "file" && f.Topo.Source != "example" {
		// Only a node discovered here has its PCI tree here.
		opts.Names = func(m *topology.Model) { pci.FillNames(m, f.SysfsRoot(), nil) }
	}
	var measured string
	cmd := &cobra.Command{
		Use:   "topo",
		Short: "Show the GPUs, the links between them, NUMA nodes and busy devices",
		Long: `Show the node's GPUs as amdrun sees them: for every pair the link type
(XGMI, NVLink NV#, PCIe level PIX/PXB/PHB/NODE/SYS) and its bandwidth in GB/s,
"*" marking a bandwidth amdrun assumed because the source gave none; for every
device its runtime index, package, NUMA node, local CPUs and whether it is busy.
Piped, it prints the same columns tab-separated under one header line, a row
per device (the full link matrix); --json prints the model that
--topology FILE reads back.`,
		Example: `  amdrun topo
  amdrun topo --json > node.json
  amdrun --topology node.json --ngpus 4 --dry-run train.py
  amdrun topo --source rocm-smi
  amdrun topo --sysfs-root /path/to/captured/tree`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if measured != "" {
				opts.Measured = func(m *topology.Model) error { return applyRBT(m, measured, f.Warn) }
			}
			return cmdutil.Either(runF, Run)(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the topology as JSON (readable back with --topology FILE)")
	cmd.Flags().StringVar(&measured, "measured", "", "replace link bandwidths with a rocm_bandwidth_test output FILE (its peak copy bandwidth matrices)")
	return cmd
}

// Run prints the topology.
func Run(ctx context.Context, opts *Options) error {
	m, err := opts.Topology(ctx)
	if err != nil {
		return err
	}
	if opts.Measured != nil {
		if err := opts.Measured(m); err != nil {
			return err
		}
	}
	if opts.Names != nil {
		opts.Names(m)
	}
	if opts.JSON {
		return topology.WriteJSON(opts.IO.Out, m)
	}
	if !opts.IO.IsStdoutTTY() {
		return cmdutil.PrintRows(opts.IO, matrixRows(m)) // the full matrix, even past maxMatrix
	}
	return writeTable(opts.IO.Out, m)
}

// cell is a matrix cell: the link label and its bandwidth.
func cell(m *topology.Model, a, b int) string {
	if a == b {
		return "X"
	}
	l := m.Link(a, b)
	label := cmp.Or(l.Level, strings.ToUpper(string(l.Type)))
	if !l.Direct && l.Type == topology.LinkPCIe && l.Level == "" {
		label = "PHB"
	}
	bw := fmt.Sprintf("%g", float64(l.MaxBandwidth)/1000)
	if l.Assumed {
		bw += "*"
	}
	if l.P2P == topology.P2PUnavailable {
		bw += " noP2P"
	}
	return label + " " + bw
}

func writeTable(w io.Writer, m *topology.Model) error {
	fmt.Fprintf(w, "Source: %s; bandwidth %s; %d devices\n\n", strings.TrimSuffix(m.Source+" "+m.SourceVersion, " "), m.Bandwidth, m.N())
	tw := cmdutil.NewTable(w)
	if m.N() > maxMatrix {
		writePackages(w, tw, m)
	} else {
		writeMatrix(tw, m)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	legend(w, m)
	return writeDevices(w, m)
}

// maxMatrix is the most devices shown as a matrix; larger nodes
// (partitioned GPUs) are shown by package.
const maxMatrix = 16

func writeMatrix(tw io.Writer, m *topology.Model) {
	for k, row := range matrixRows(m) {
		if k == 0 {
			row[0] = ""
		}
		fmt.Fprintln(tw, strings.Join(row[:1+m.N()+4], "\t")) // up to State
	}
}

// matrixRows are the header and a row per device: "GPU", a link cell per
// device, then deviceCols.
func matrixRows(m *topology.Model) [][]string {
	head := []string{"GPU"}
	for i := range m.Devices {
		head = append(head, fmt.Sprintf("GPU%d", i))
	}
	rows := [][]string{append(head, deviceCols...)}
	for i, d := range m.Devices {
		row := []string{fmt.Sprintf("GPU%d", i)}
		for j := range m.Devices {
			row = append(row, cell(m, i, j))
		}
		rows = append(rows, append(row, deviceCells(d)...))
	}
	return rows
}

func legend(w io.Writer, m *topology.Model) {
	fmt.Fprintln(w, "\nCells: link type and max bandwidth in GB/s; * = assumed (the source gave no figure).")
	fmt.Fprintln(w, "XGMI = AMD Infinity Fabric, NV# = # NVLinks, PIX/PXB = PCIe switch, PHB = through the host bridge, NODE = across host bridges, SYS = across NUMA nodes.")
	if slices.ContainsFunc(m.Links, func(l topology.Link) bool { return l.P2P == topology.P2PUnavailable }) {
		fmt.Fprintln(w, "noP2P = no peer-to-peer access: copies go through host memory; selection counts them at half the host path.")
	}
}

// writePackages shows a large node by package, the slowest link of any
// device pair between them.
func writePackages(w, tw io.Writer, m *topology.Model) {
	pk := m.Packages()
	fmt.Fprintf(w, "%d devices in %d packages (more than %d devices: links shown between packages, the slowest pair; --json has every pair)\n\n", m.N(), len(pk), maxMatrix)
	fmt.Fprint(tw, "\tdevices\t")
	for i := range pk {
		fmt.Fprintf(tw, "P%d\t", i)
	}
	fmt.Fprintln(tw, "NUMA\tState")
	for i, a := range pk {
		fmt.Fprintf(tw, "P%d\t%s\t", i, topology.FormatCPUList(a))
		for _, b := range pk {
			fmt.Fprintf(tw, "%s\t", slowest(m, a, b))
		}
		busy, numas := 0, map[int]bool{}
		for _, d := range a {
			numas[m.Devices[d].NUMANode] = true
			if m.Devices[d].Busy {
				busy++
			}
		}
		ns := slices.Collect(maps.Keys(numas))
		st := "free"
		if busy > 0 {
			st = fmt.Sprintf("%d busy", busy)
		}
		fmt.Fprintf(tw, "%s\t%s\n", topology.FormatCPUList(ns), st)
	}
}

// slowest is the cell of the slowest link between device groups a and b.
func slowest(m *topology.Model, a, b []int) string {
	var worst *topology.Link
	wa, wb := -1, -1
	for _, x := range a {
		for _, y := range b {
			// Link(x, x) is nil: a device is not its own slowest link.
			if l := m.Link(x, y); l != nil && (worst == nil || l.MaxBandwidth < worst.MaxBandwidth) {
				worst, wa, wb = l, x, y
			}
		}
	}
	if worst == nil {
		return "X"
	}
	return cell(m, wa, wb)
}

func writeDevices(w io.Writer, m *topology.Model) error {
	fmt.Fprintln(w)
	tw := cmdutil.NewTable(w)
	fmt.Fprintln(tw, "GPU\t"+strings.Join(deviceCols[4:], "\t"))
	for _, d := range m.Devices {
		fmt.Fprintf(tw, "%d\t%s\n", d.Index, strings.Join(deviceCells(d)[4:], "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(m.NUMANodes) > 0 {
		fmt.Fprintln(w)
		for _, n := range m.NUMANodes {
			fmt.Fprintf(w, "NUMA node %d: CPUs %s\n", n.ID, cmp.Or(topology.FormatCPUList(n.CPUs), "-"))
		}
	}
	return nil
}

// deviceCols are the columns deviceCells fills.
var deviceCols = []string{"NUMA", "CPUs", "Package/hive", "State", "Runtime", "Name", "PCI", "Unique ID", "Memory used"}

func deviceCells(d topology.Device) []string {
	numa, group, state, mem := "-", "-", "free", "-"
	if d.NUMANode >= 0 {
		numa = fmt.Sprint(d.NUMANode)
	}
	switch { // the device's package, else its XGMI hive
	case d.Package != "":
		group = d.Package
	case d.Hive != "":
		group = "hive " + d.Hive
	}
	if d.Busy {
		state = "busy (" + d.BusyReason + ")"
	}
	switch {
	case d.MemTotalMiB > 0:
		mem = fmt.Sprintf("%d/%d MiB", d.MemUsedMiB, d.MemTotalMiB)
	case d.MemUsedPct > 0:
		mem = fmt.Sprintf("%.0f%%", d.MemUsedPct)
	}
	return []string{numa, cmp.Or(topology.FormatCPUList(d.CPUs), "-"), group, state,
		fmt.Sprint(d.RuntimeIndex), cmp.Or(d.Name, "-"), cmp.Or(d.PCIAddress, "-"), cmp.Or(d.UniqueID, "-"), mem}
}

// applyRBT puts a rocm_bandwidth_test output file's figures on m's links.
func applyRBT(m *topology.Model, path string, warn topology.Warner) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("--measured: %w", err)
	}
	defer f.Close()
	r, err := rbt.Parse(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return rbt.Apply(m, r, warn)
}
