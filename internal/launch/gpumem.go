package launch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/topology"
)

// Restart hygiene (issue 33): a restart waits until the memory the failed
// attempt held is free again.

// memSlackMiB is how much more than before a device may hold and count as
// free: another job's allocator moves by that much.
const memSlackMiB = 256

// MemUsed reads the memory in use on a device, in MiB (false: unknown).
type MemUsed func(d topology.Device) (int64, bool)

// pciDevices is where sysfs lists PCI devices (tests point it elsewhere).
var pciDevices = "/sys/bus/pci/devices"

// ReadMemUsed reads a device's memory in use: AMD's from sysfs
// mem_info_vram_used, NVIDIA's from nvidia-smi by the device's index.
func ReadMemUsed(d topology.Device) (int64, bool) {
	var b []byte
	var err error
	shift := 0 // sysfs counts bytes, nvidia-smi MiB
	switch d.Vendor {
	case topology.VendorAMD:
		addr, ok := topology.NormalizePCI(d.PCIAddress)
		if !ok {
			return 0, false
		}
		b, err = os.ReadFile(filepath.Join(pciDevices, addr, "mem_info_vram_used"))
		shift = 20
	case topology.VendorNVIDIA:
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b, err = exec.CommandContext(ctx, "nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
			"-i", strconv.Itoa(d.Index)).Output()
	default:
		return 0, false
	}
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n >> shift, err == nil && n >= 0
}

type memWatch struct {
	devs  []topology.Device
	read  MemUsed
	limit time.Duration
	base  map[string]int64
}

func newMemWatch(p *plan.Plan, o RunOptions) *memWatch {
	m := &memWatch{read: o.MemUsed, limit: o.RestartWait}
	if m.read == nil {
		m.read = ReadMemUsed
	}
	for _, r := range p.Ranks {
		m.devs = append(m.devs, r.Devices...)
	}
	return m
}

// baseline reads the devices' memory before an attempt a restart may follow.
func (m *memWatch) baseline(restartable bool) {
	m.base = nil
	if !restartable || m.limit <= 0 {
		return
	}
	m.base = map[string]int64{}
	for _, d := range m.devs {
		if n, ok := m.read(d); ok {
			m.base[d.Key()] = n
		}
	}
}

type memHeld struct {
	dev         topology.Device
	before, now int64
}

// wait polls every poll until every device of the baseline holds no more
// than before or m.limit passes, and returns those that still do.
func (m *memWatch) wait(poll time.Duration) []memHeld {
	deadline := time.Now().Add(m.limit)
	for {
		var held []memHeld
		for _, d := range m.devs {
			b, ok := m.base[d.Key()]
			if !ok {
				continue
			}
			if n, ok := m.read(d); ok && n > b+memSlackMiB {
				held = append(held, memHeld{d, b, n})
			}
		}
		if len(held) == 0 || !time.Now().Before(deadline) {
			return held
		}
		time.Sleep(min(poll, time.Until(deadline)))
	}
}

func heldLine(held []memHeld, wait time.Duration) string {
	parts := make([]string, len(held))
	for i, h := range held {
		parts[i] = fmt.Sprintf("device %d holds %d MiB (%d MiB before the attempt)", h.dev.Index, h.now, h.before)
	}
	return fmt.Sprintf("amdrun: not restarting: %s %s after the failed attempt ended; ranks started now would run out of memory (--restart-wait %s)\n",
		strings.Join(parts, ", "), wait, wait)
}
