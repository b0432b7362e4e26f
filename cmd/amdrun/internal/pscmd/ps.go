// Package pscmd is `amdrun ps`: which devices of this node are leased by
// an amdrun job, busy with another process, or free.
package pscmd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/iostreams"
	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/lease"
	"github.com/amdrun/amdrun/internal/topology"

	"github.com/amdrun/amdrun/internal/printable"
)

// Options are the inputs of `amdrun ps`.
type Options struct {
	IO       *iostreams.IOStreams
	Topology func(context.Context) (*topology.Model, error)
	Leases   func() (*lease.Dir, error)
	// SourceAuto says the topology source was left to auto-detection:
	// finding no GPU is an answer, not an error.
	SourceAuto bool
	JSON       bool
}

// NewCmdPs returns `amdrun ps`.
func NewCmdPs(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Topology: f.Topology}
	var dir string
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "Show which devices are leased by amdrun jobs, busy, or free",
		Long: `Show every device of this node and its state: leased (held by a running
amdrun job: pid, user, start time and command, as the kernel reports them),
unusable (a file that is not a lease file sits at its lease path: the warning
names it and its owner), busy (another process has memory on it or runs on it,
as the vendor tool or KFD reports), or free. Then the CPUs amdrun jobs
lease (ranks bound with --bind exclusive or core-complex), one line per
job. On a terminal, the jobs waiting for devices (--wait) follow, oldest
first: user, pid, devices asked for and since when, for the tickets the
kernel vouches for. Piped, the device columns are tab-separated under the
same header line; --json gives every field, the CPUs and the queue too. On
a machine without a GPU it says so in one line and exits 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Leases = func() (*lease.Dir, error) { return f.OpenLeases(dir, false) }
			opts.SourceAuto = (f.Topo.Source == "" || f.Topo.Source == "auto") && f.Topo.File == ""
			return cmdutil.Either(runF, Run)(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print as JSON")
	cmd.Flags().StringVar(&dir, "lease-dir", "", "lease directory (default $AMDRUN_LEASE_DIR, else /run/lock/amdrun)")
	return cmd
}

// Row is one device's state.
type Row struct {
	Device int    `json:"device"`
	Key    string `json:"key"`
	Name   string `json:"name,omitempty"`
	// State: "leased", "unusable" (a bad file at its lease path), "busy", "free".
	State    string        `json:"state"`
	Busy     bool          `json:"busy"`
	Why      string        `json:"busy_reason,omitempty"`
	MemUsed  int64         `json:"mem_used_mib,omitempty"`
	Holder   *lease.Holder `json:"holder,omitempty"`
	Fault    string        `json:"fault,omitempty"`
	NUMANode int           `json:"numa_node"`
}

// Rows is the state of every device of m, held as lease.Dir.Held reports.
func Rows(m *topology.Model, held map[string]lease.State) []Row {
	rows := make([]Row, len(m.Devices))
	keys := m.Keys()
	for i, d := range m.Devices {
		r := Row{Device: d.Index, Key: keys[i], Name: d.Name, Busy: d.Busy, Why: d.BusyReason, MemUsed: d.MemUsedMiB, NUMANode: d.NUMANode, State: "free"}
		if d.Busy {
			r.State = "busy"
		}
		if s, ok := held[r.Key]; ok {
			if s.Fault != nil {
				r.State, r.Fault = "unusable", printable.String(s.Fault.Error(), 300)
			} else {
				h := s.Holder
				r.Holder, r.State = &h, "leased"
			}
		}
		rows[i] = r
	}
	return rows
}

// detail describes a holder for the table, its command escaped and cut.
func detail(h *lease.Holder) string {
	if h.PID <= 0 {
		if h.Locker > 0 {
			return "held by a process this user cannot see (" + h.Note() + ")"
		}
		return "held by a process this node does not show"
	}
	d := fmt.Sprintf("pid %d", h.PID)
	switch {
	case h.Gone:
		return d + " (exited; the job's processes keep the lease)"
	case h.User != "":
		d += ", user " + printable.String(h.User, 32)
	case h.UID >= 0:
		d += fmt.Sprintf(", uid %d", h.UID)
	}
	if !h.Start.IsZero() {
		d += ", started " + h.Start.Format("2006-01-02 15:04:05")
	}
	if h.Command != "" {
		d += ": " + printable.String(h.Command, 120)
	}
	if n := h.Note(); n != "" {
		d += " [" + n + "]"
	}
	return d
}

// Run prints the tables or JSON. On a machine without a GPU (the source
// left to auto-detection) it says so in one line and succeeds.
func Run(ctx context.Context, opts *Options) error {
	m, err := opts.Topology(ctx)
	if err != nil && !(errors.Is(err, discover.ErrNoGPU) && opts.SourceAuto) {
		return err
	}
	d, lerr := opts.Leases()
	if lerr != nil {
		return lerr
	}
	defer d.Close()
	cpuHeld, lerr := d.ListCPUs()
	if lerr != nil {
		return lerr
	}
	cpus := lease.GroupCPUs(cpuHeld)
	if err != nil {
		// CPU ranks lease CPUs on a machine without a GPU too.
		if opts.JSON {
			return cmdutil.PrintJSON(opts.IO.Out, map[string]any{"source": "none", "devices": []Row{}, "cpus": cpus})
		}
		if _, err = fmt.Fprintln(opts.IO.Out, err); err != nil { // "no GPU found (what each source said)"
			return err
		}
		return printCPUs(opts, cpus)
	}
	held, err := d.Held(m.Keys())
	if err != nil {
		return err
	}
	rows := Rows(m, held)
	queue := d.Queue(len(m.Keys()))
	if queue == nil {
		queue = []lease.Waiting{}
	}
	if opts.JSON {
		out := map[string]any{"source": m.Source, "lease_dir": d.Path(), "lease_mode": d.Mode().String(), "devices": rows, "cpus": cpus, "queue": queue}
		if why := d.Degraded(); why != "" {
			out["degraded"] = why
		}
		return cmdutil.PrintJSON(opts.IO.Out, out)
	}
	if err := printDevices(opts, rows); err != nil {
		return err
	}
	if err := printCPUs(opts, cpus); err != nil {
		return err
	}
	if !opts.IO.IsStdoutTTY() {
		// Piped, the output stays tables; --json lists the queue.
		return nil
	}
	return printQueue(opts.IO.Out, queue)
}

// printDevices prints one line per device.
func printDevices(opts *Options, rows []Row) error {
	out := [][]string{{"GPU", "KEY", "NUMA", "STATE", "DETAIL"}}
	for _, r := range rows {
		text := "-"
		switch {
		case r.Holder != nil:
			text = detail(r.Holder)
		case r.Fault != "":
			text = r.Fault
		case r.Busy:
			text = r.Why
		}
		numa := "-"
		if r.NUMANode >= 0 {
			numa = fmt.Sprint(r.NUMANode)
		}
		out = append(out, []string{fmt.Sprint(r.Device), r.Key, numa, r.State, text})
	}
	return cmdutil.PrintRows(opts.IO, out)
}

// printCPUs prints the CPU leases, nothing when there are none.
func printCPUs(opts *Options, cpus []lease.CPUHolding) error {
	if len(cpus) == 0 {
		return nil
	}
	out := [][]string{{"CPUS", "STATE", "DETAIL"}}
	for _, c := range cpus {
		state, text := "leased", detail(&c.Holder)
		if c.Fault != "" {
			state, text = "unusable", c.Fault
		}
		out = append(out, []string{topology.FormatCPUList(c.CPUs), state, text})
	}
	return cmdutil.PrintRows(opts.IO, out)
}

// printQueue lists, for people, the jobs waiting, oldest first.
func printQueue(out io.Writer, queue []lease.Waiting) error {
	if len(queue) == 0 {
		return nil
	}
	tw := cmdutil.NewTable(out)
	fmt.Fprintf(tw, "\nQUEUE\tUSER\tPID\tDEVICES\tSINCE\n")
	for i, w := range queue {
		who := cmp.Or(w.User, fmt.Sprintf("uid %d", w.UID))
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\n", i+1, printable.String(who, 32), w.PID, w.Need, w.Since.Format("2006-01-02 15:04:05"))
	}
	return tw.Flush()
}
