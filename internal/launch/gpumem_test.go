package launch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/topology"
)

// TestReadMemUsed: NVIDIA's memory in use from nvidia-smi (a fake first
// on PATH, which checks its arguments), AMD's from mem_info_vram_used in
// a fake sysfs; what cannot be read is unknown, never 0.
func TestReadMemUsed(t *testing.T) {
	bin := t.TempDir()
	fake := "#!/bin/sh\n[ \"$*\" = \"--query-gpu=memory.used --format=csv,noheader,nounits -i 3\" ] || exit 9\necho 40960\n"
	if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	sys := t.TempDir()
	old := pciDevices
	pciDevices = sys
	t.Cleanup(func() { pciDevices = old })
	if err := os.MkdirAll(filepath.Join(sys, "0000:0c:00.0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sys, "0000:0c:00.0", "mem_info_vram_used"), []byte("3221225472\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		d    topology.Device
		want int64
		ok   bool
	}{
		{topology.Device{Vendor: topology.VendorNVIDIA, Index: 3}, 40960, true},
		{topology.Device{Vendor: topology.VendorNVIDIA, Index: 2}, 0, false}, // nvidia-smi fails
		{topology.Device{Vendor: topology.VendorAMD, PCIAddress: "0000:0C:00.0"}, 3072, true},
		{topology.Device{Vendor: topology.VendorAMD, PCIAddress: "0000:0d:00.0"}, 0, false},
		{topology.Device{Vendor: topology.VendorAMD, PCIAddress: "../../etc"}, 0, false},
		{topology.Device{}, 0, false},
	} {
		if n, ok := ReadMemUsed(tc.d); n != tc.want || ok != tc.ok {
			t.Errorf("%+v: %d %v, want %d %v", tc.d, n, ok, tc.want, tc.ok)
		}
	}
}

// TestWaitMemFree: the wait ends as soon as every device is back to what
// it held before the attempt (within memSlackMiB); a device that still
// holds the failed ranks' memory when the wait is over is named, one
// that cannot be read is not waited for.
func TestWaitMemFree(t *testing.T) {
	devs := []topology.Device{{Index: 0, PCIAddress: "0000:0c:00.0"}, {Index: 1, PCIAddress: "0000:0d:00.0"}, {Index: 2, PCIAddress: "0000:0e:00.0"}}
	reads := map[int][]int64{0: {30000, 30000, 1100}, 1: {500}}
	read := func(d topology.Device) (int64, bool) {
		r, ok := reads[d.Index]
		if !ok {
			return 0, false
		}
		n := r[0]
		if len(r) > 1 {
			reads[d.Index] = r[1:]
		}
		return n, true
	}
	base := map[string]int64{"0000:0c:00.0": 1000, "0000:0d:00.0": 500}
	start := time.Now()
	if held := (&memWatch{devs: devs, base: base, read: read, limit: 10 * time.Second}).wait(time.Millisecond); len(held) != 0 {
		t.Fatalf("held %+v after the memory came back", held)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the wait went on for %s after the memory came back", d)
	}
	reads[0] = []int64{30000}
	held := (&memWatch{devs: devs, base: base, read: read, limit: 20 * time.Millisecond}).wait(time.Millisecond)
	if len(held) != 1 || held[0].dev.Index != 0 || held[0].now != 30000 || held[0].before != 1000 {
		t.Fatalf("held %+v, want device 0 at 30000 MiB", held)
	}
	line := heldLine(held, 30*time.Second)
	want := "amdrun: not restarting: device 0 holds 30000 MiB (1000 MiB before the attempt) 30s after the failed attempt ended; ranks started now would run out of memory (--restart-wait 30s)\n"
	if line != want || strings.Count(line, "\n") != 1 {
		t.Errorf("line %q, want %q", line, want)
	}
}
