package nvidiasmi

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/amdrun/amdrun/internal/topology"
)

// Source is the Model.Source of models built here.
const Source = "nvidia-smi"

// Build makes a finished model from what the nvidia-smi commands printed:
// topo is required; nvlink, gpus and apps may be nil. Devices are the topo
// -m GPUs, both indices nvidia-smi's (amdrun runs CUDA with
// CUDA_DEVICE_ORDER=PCI_BUS_ID, nvidia-smi's order); gpus and apps fill in
// identity, memory, utilisation and processes. NUMANode is NUMA Affinity,
// else GPU NUMA ID. NV# is a bond of # links at the slower GPU's nvlink
// speed. Disagreements between the inputs go to warn; a model that does
// not validate is a *topology.ParseError.
func Build(topo *Topo, nvlink *NVLinkStatus, gpus []GPU, apps []ComputeApp, warn topology.Warner) (*topology.Model, error) {
	m := &topology.Model{Source: Source, Vendor: topology.VendorNVIDIA, Bandwidth: "theoretical"}
	m.Devices, m.SourceVersion = devices(topo, gpus, warn)
	countApps(m, apps, warn)
	m.NUMANodes = numaNodes(m.Devices)
	m.Links = links(topo, nvlink, warn)
	if err := m.Finish(); err != nil {
		return nil, topology.NewParseError(Source, 0, 0, err, "")
	}
	return m, nil
}

// devices makes one device per topo -m GPU, filled from gpus by index.
func devices(topo *Topo, gpus []GPU, warn topology.Warner) (devs []topology.Device, version string) {
	n := len(topo.GPUs)
	byIndex := map[int]*GPU{}
	for i := range gpus {
		g := &gpus[i]
		byIndex[g.Index] = g
		if g.Index >= n {
			warn.Warn("nvidia-smi: --query-gpu lists GPU %d, topo -m only GPU0-GPU%d", g.Index, n-1)
		}
		version = cmp.Or(version, g.DriverVersion)
	}
	for i, tg := range topo.GPUs {
		d := topology.Device{Index: i, RuntimeIndex: i, Vendor: topology.VendorNVIDIA, NUMANode: tg.NUMAAffinity}
		if d.NUMANode < 0 {
			d.NUMANode = tg.GPUNUMAID // -1 when unknown too
		}
		d.CPUs = append([]int(nil), tg.CPUAffinity...)
		if g := byIndex[i]; g != nil {
			d.Name, d.PCIAddress, d.UniqueID = g.Name, g.PCIAddress, g.UUID
			d.MemTotalMiB, d.MemUsedMiB, d.UtilPercent = g.MemTotalMiB, g.MemUsedMiB, g.UtilPercent
		} else if gpus != nil {
			warn.Warn("nvidia-smi: GPU%d of topo -m is missing from --query-gpu", i)
		}
		devs = append(devs, d)
	}
	return devs, version
}

func countApps(m *topology.Model, apps []ComputeApp, warn topology.Warner) {
	byPCI := map[string]int{}
	for i, d := range m.Devices {
		if d.PCIAddress != "" {
			byPCI[d.PCIAddress] = i
		}
	}
	for _, a := range apps {
		i, ok := byPCI[a.PCIAddress]
		if !ok {
			warn.Warn("nvidia-smi: process %d runs on %s, which is not a known GPU", a.PID, a.PCIAddress)
			continue
		}
		m.Devices[i].Processes++
	}
}

// numaNodes lists the devices' NUMA nodes with the union of their CPUs.
func numaNodes(devs []topology.Device) []topology.NUMANode {
	numaCPUs := map[int][]int{}
	for _, d := range devs {
		if d.NUMANode >= 0 {
			numaCPUs[d.NUMANode] = append(numaCPUs[d.NUMANode], d.CPUs...)
		}
	}
	var out []topology.NUMANode
	for _, id := range slices.Sorted(maps.Keys(numaCPUs)) {
		cpus, _ := topology.ParseCPUList(topology.FormatCPUList(numaCPUs[id]))
		out = append(out, topology.NUMANode{ID: id, CPUs: cpus})
	}
	return out
}

func links(topo *Topo, nvlink *NVLinkStatus, warn topology.Warner) []topology.Link {
	n := len(topo.GPUs)
	speeds := make([]int64, n)
	for i := range speeds {
		if g := nvlink.GPU(i); g != nil {
			speeds[i] = g.LinkSpeed()
		}
	}
	var out []topology.Link
	warnedSpeed := false
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			speed := cmp.Or(min(speeds[a], speeds[b]), max(speeds[a], speeds[b])) // the slower known one
			cell := topo.Cells[a][b]
			typ, count, _ := linkKind(cell)
			if typ != topology.LinkNVLink {
				out = append(out, topology.PCIeLink(a, b, cell))
				continue
			}
			if speed == 0 && nvlink != nil && !warnedSpeed {
				warnedSpeed = true
				warn.Warn("nvidia-smi: nvlink -s gives no active link speed for GPU%d/GPU%d; assuming %d MB/s per link", a, b, topology.NVLinkBandwidth)
			}
			// An NVLink bond is one hop, as one PCIe switch; speed 0 is unknown.
			out = append(out, topology.Link{A: a, B: b, Type: typ, Level: cell, Count: count, Hops: topology.HopsPIX, Direct: true,
				MinBandwidth: int64(count) * speed, MaxBandwidth: int64(count) * speed})
		}
	}
	return out
}

// Arguments of the nvidia-smi commands Discover runs, exactly as passed.
var (
	argsTopo        = []string{"topo", "-m"}
	argsNVLink      = []string{"nvlink", "-s"}
	argsP2P         = []string{"topo", "-p2p", "r"}
	argsQueryGPU    = []string{"--query-gpu=" + QueryGPUFields, "--format=csv,noheader,nounits"}
	argsComputeApps = []string{"--query-compute-apps=" + ComputeAppsFields, "--format=csv,noheader,nounits"}
)

// Discover reads the node's NVIDIA GPUs by running the args* commands
// through run (argv exactly as listed: fake nvidia-smi scripts key on it)
// into the parsers, Build and markP2P. topo -m and --query-gpu must list
// as many GPUs (else topology.ErrInconsistent). A failing or unreadable
// `nvlink -s` or `topo -p2p r` only warns; any other failure is returned
// as run or the parser gave it.
func Discover(ctx context.Context, run topology.Runner, warn topology.Warner) (*topology.Model, error) {
	// The calls are independent, so run at once: on the lent 1 x H200
	// (driver 580.159.04, 2026-12-02, 9 rounds) topo -p2p r alone took
	// 21.9 ms (median), the four others at once 50.2 ms, all five 51.4 ms.
	argvs := [][]string{argsTopo, argsQueryGPU, argsComputeApps, argsNVLink, argsP2P}
	outs := make([][]byte, len(argvs))
	errs := make([]error, len(argvs))
	var wg sync.WaitGroup
	for i, a := range argvs {
		wg.Add(1)
		go func(i int, a []string) {
			defer wg.Done()
			outs[i], errs[i] = run(ctx, "nvidia-smi", a...)
		}(i, a)
	}
	wg.Wait()
	if err := cmp.Or(errs[:3]...); err != nil {
		return nil, err
	}
	if i := slices.IndexFunc(errs, cancelled); i >= 0 {
		return nil, errs[i] // the context's end, which the warnings below would hide
	}
	topo, err := ParseTopo(bytes.NewReader(outs[0]))
	if err != nil {
		return nil, err
	}
	gpus, err := ParseQueryGPU(bytes.NewReader(outs[1]))
	if err != nil {
		return nil, err
	}
	if len(gpus) != len(topo.GPUs) {
		// One output is cut short, or they describe different devices.
		return nil, fmt.Errorf("nvidia-smi: %w: `nvidia-smi topo -m` lists %d GPUs but `nvidia-smi --query-gpu` %d",
			topology.ErrInconsistent, len(topo.GPUs), len(gpus))
	}
	apps, err := ParseComputeApps(bytes.NewReader(outs[2]))
	if err != nil {
		return nil, err
	}
	var nvl *NVLinkStatus
	if err := errs[3]; err != nil {
		warn.Warn("nvidia-smi: nvlink -s failed, assuming NVLink bandwidths: %v", err)
	} else if nvl, err = ParseNVLinkStatus(bytes.NewReader(outs[3])); err != nil {
		warn.Warn("nvidia-smi: assuming NVLink bandwidths: %v", err)
		nvl = nil
	}
	m, err := Build(topo, nvl, gpus, apps, warn)
	if err != nil {
		return nil, err
	}
	if err := errs[4]; err != nil {
		warn.Warn("nvidia-smi: topo -p2p r failed, peer-to-peer access unknown: %v", err)
		return m, nil
	}
	p2p, err := ParseP2P(bytes.NewReader(outs[4]))
	if err == nil {
		err = markP2P(m, p2p)
	}
	if err != nil {
		warn.Warn("nvidia-smi: peer-to-peer access unknown: %v", err)
	}
	return m, nil
}

// cancelled says whether err is the context's end.
func cancelled(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// markP2P sets each link's P2P from `nvidia-smi topo -p2p r`: unavailable
// when either direction refuses, available when both read OK, unknown
// for U. A matrix of another size wraps topology.ErrInconsistent.
func markP2P(m *topology.Model, p *P2P) error {
	n := m.N()
	if len(p.Status) != n {
		return fmt.Errorf("%s: %w: %d GPUs, `nvidia-smi topo -m` %d", SourceP2P, topology.ErrInconsistent, len(p.Status), n)
	}
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			there, back := p.Status[a][b], p.Status[b][a]
			switch {
			case p2pRefused[there] || p2pRefused[back]:
				m.Link(a, b).P2P = topology.P2PUnavailable
			case there == "OK" && back == "OK":
				m.Link(a, b).P2P = topology.P2PAvailable
			}
		}
	}
	return nil
}

var p2pRefused = map[string]bool{"CNS": true, "GNS": true, "TNS": true, "NS": true}
