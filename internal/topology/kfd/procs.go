package kfd

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// gpuDevices maps each GPU node's gpu_id under dir to its device index.
func gpuDevices(fsys fs.FS, dir string, n int) (map[uint64]int, error) {
	ids, err := numericEntries(fsys, dir, nil)
	if err != nil {
		return nil, err
	}
	devOf := map[uint64]int{}
	for _, id := range ids {
		nd := path.Join(dir, strconv.Itoa(id))
		props, hidden, err := readNodeProps(fsys, nd)
		if err != nil {
			return nil, err
		}
		if hidden || props["simd_count"] == 0 {
			continue
		}
		p := path.Join(nd, "gpu_id")
		g, ok, err := readUint(fsys, p, 32)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("kfd: %s: %w", p, fs.ErrNotExist)
		}
		devOf[g] = len(devOf)
	}
	if len(devOf) != n {
		return nil, fmt.Errorf("kfd: %s has %d GPU nodes but the model has %d devices", dir, len(devOf), n)
	}
	return devOf, nil
}

// ReadProcs marks the devices of m (Read's model of fsys) that other
// processes use: KFD lists each process that opened /dev/kfd (amdrun never
// does) under proc/<pid>/, with vram_<gpu_id> files (bytes held) and
// queues/<qid>/gpuid. A device where one holds VRAM or a queue becomes
// Busy, "pid 4242 holds 2048 MiB VRAM". No proc directory means no user; a
// process that exits during the walk is skipped.
func ReadProcs(fsys fs.FS, m *topology.Model) error {
	dir, err := findNodes(fsys)
	if err != nil {
		return err
	}
	base := path.Dir(dir) // .../topology or "."
	if path.Base(base) == "topology" {
		base = path.Dir(base)
	}
	pdir := path.Join(base, "proc") // beside the nodes directory
	if fi, err := fs.Stat(fsys, pdir); err != nil || !fi.IsDir() {
		return nil // no process has opened /dev/kfd (or a capture without proc/)
	}
	devOf, err := gpuDevices(fsys, dir, m.N())
	if err != nil {
		return err
	}
	pids, err := numericEntries(fsys, pdir, nil)
	if err != nil {
		return err
	}
	w := &procWalk{fsys: fsys, devOf: devOf, use: make([]map[int]uint64, m.N())}
	for _, pid := range pids {
		if err := w.process(path.Join(pdir, strconv.Itoa(pid)), pid); err != nil {
			return err
		}
	}
	for i, u := range w.use {
		if len(u) > 0 {
			markBusy(&m.Devices[i], u)
		}
	}
	return nil
}

type procWalk struct {
	fsys  fs.FS
	devOf map[uint64]int   // gpu_id -> device index
	use   []map[int]uint64 // per device: pid -> VRAM bytes held (0: compute queues only)
}

func (w *procWalk) add(dev, pid int, n uint64) {
	if w.use[dev] == nil {
		w.use[dev] = map[int]uint64{}
	}
	w.use[dev][pid] += n
}

// process adds what the process in pd holds: VRAM (vram_<gpu_id> files)
// and compute queues (queues/<qid>/gpuid); one that exited is skipped.
func (w *procWalk) process(pd string, pid int) error {
	ents, err := fs.ReadDir(w.fsys, pd)
	if err != nil && !errors.Is(err, fs.ErrNotExist) { // gone: no entries
		return fmt.Errorf("kfd: %w", err)
	}
	for _, e := range ents {
		g, ok := strings.CutPrefix(e.Name(), "vram_")
		gid, err := strconv.ParseUint(g, 10, 32)
		dev, known := w.devOf[gid]
		if !ok || err != nil || !known {
			continue // !known: a GPU outside this model (hidden by the cgroup)
		}
		n, found, err := readUint(w.fsys, path.Join(pd, e.Name()), 64)
		if err != nil {
			return err
		}
		if found && n > 0 {
			w.add(dev, pid, n)
		}
	}
	qd := path.Join(pd, "queues")
	qids, err := numericEntries(w.fsys, qd, nil)
	if err != nil {
		return err
	}
	for _, q := range qids {
		gid, found, err := readUint(w.fsys, path.Join(qd, strconv.Itoa(q), "gpuid"), 64)
		if err != nil {
			return err
		}
		if dev, ok := w.devOf[gid]; found && ok {
			w.add(dev, pid, 0)
		}
	}
	return nil
}

func markBusy(d *topology.Device, u map[int]uint64) {
	var total uint64
	var pids []string
	for _, pid := range slices.Sorted(maps.Keys(u)) {
		pids = append(pids, strconv.Itoa(pid))
		total += u[pid]
	}
	who := "pid " + pids[0] + " holds"
	if len(pids) > 1 {
		who = "pids " + strings.Join(pids, ", ") + " hold"
	}
	mib := int64((total + 1<<20 - 1) >> 20) // round up: a few bytes still show as 1 MiB
	d.Busy = true
	d.Processes = max(d.Processes, len(pids))
	d.MemUsedMiB = max(d.MemUsedMiB, mib)
	if d.MemTotalMiB > 0 {
		d.MemUsedPct = 100 * float64(d.MemUsedMiB) / float64(d.MemTotalMiB)
	}
	d.BusyReason = who + " compute queues"
	if total > 0 {
		d.BusyReason = fmt.Sprintf("%s %d MiB VRAM", who, mib)
	}
}

// readUint reads a file holding one unsigned decimal of at most bits bits;
// found is false when it vanished.
func readUint(fsys fs.FS, p string, bits int) (n uint64, found bool, err error) {
	s, ok, err := readSmall(fsys, p)
	if err != nil || !ok {
		return 0, false, err
	}
	n, perr := strconv.ParseUint(s, 10, bits)
	if perr != nil {
		return 0, false, topology.NewParseError("kfd "+p, 1, 0, topology.ErrBadNumber, "%q", s)
	}
	return n, true, nil
}
