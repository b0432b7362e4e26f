package nvidiasmi

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/topology"
)

// Issue 24: Grace nodes print NUMA Affinity as a node list.
func TestParseTopoGraceNUMALists(t *testing.T) {
	topo, m := buildTopo(t, public(t, "nvidia-smi-topo-m-grace-4gpu-numa-lists-derived.txt"))
	g := topo.GPUs[0]
	if g.NUMAAffinity != 0 || g.GPUNUMAID != 2 {
		t.Errorf("GPU0 = %+v", g)
	}
	if got := numaOf(m); !reflect.DeepEqual(got, []int{0, 0, 1, 1}) {
		t.Errorf("NUMA nodes = %v, want [0 0 1 1]", got)
	}
	if !reflect.DeepEqual(m.Devices[2].CPUs, cpus(t, "72-143")) {
		t.Errorf("GPU2 CPUs = %v", m.Devices[2].CPUs)
	}
}

// Issue 24: cells run together ("SYSSYS") are split, never shifted.
func TestParseTopoMergedCellsSplit(t *testing.T) {
	want, err := ParseTopo(bytes.NewReader(public(t, "nvidia-smi-topo-m-a100-8gpu-17nic-single-numa.txt")))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseTopo(bytes.NewReader(public(t, "nvidia-smi-topo-m-a100-8gpu-17nic-merged-cells-derived.txt")))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("merged cells read as\n%+v\nwant\n%+v", got.GPUs, want.GPUs)
	}
	// The same with real tabs, on a 4-NUMA capture: NIC0/NIC1 run together.
	data := string(public(t, "nvidia-smi-topo-m-h100-8gpu-nv18-2nic-4numa-vllm6732.txt"))
	want, err = ParseTopo(strings.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	merged := strings.Replace(data, "\tSYS\tSYS\t56-83", "\tSYSSYS\t56-83", 1)
	got, err = ParseTopo(strings.NewReader(merged))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("tabbed merged cells: err %v, equal %v", err, reflect.DeepEqual(got, want))
	}
	// Header labels run together (vllm-project/vllm#31594).
	hdr := "GPU0    GPU1    NIC0    NIC1NIC2    CPU Affinity    NUMA Affinity   GPU NUMA ID\n" +
		"GPU0     X      NV18    PIX     NODE NODE     0-15    0               N/A\n" +
		"GPU1    NV18     X      NODE    PIX  NODE     16-31   1               N/A\n\n"
	tp, err := ParseTopo(strings.NewReader(hdr))
	if err != nil || tp.GPUs[1].NUMAAffinity != 1 || len(tp.GPUs[1].CPUAffinity) != 16 {
		t.Errorf("merged header labels: %v %+v", err, tp)
	}
}

func TestParseTopoRefusesCutAndUnknownCells(t *testing.T) {
	head := "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
	tests := []struct {
		name, in string
		want     error
		msg      string
	}{
		{"row cut after its matrix cells",
			head + "GPU0\t X \tNV18\tPIX\n" + "GPU1\tNV18\t X \tPIX\t0-7\t0\t\tN/A\n\n", topology.ErrNotSquare, "ends after its device cells"},
		{"input ends in the last GPU row", head + "GPU0\t X \tNV18\tPIX\t0-7\t0\t\tN/A\nGPU1\tNV18\t X \tPIX\t0-5", topology.ErrTruncated, "may be cut short"},
		{"unknown NIC cell", head + "GPU0\t X \tNV18\tQPI\t0-7\t0\t\tN/A\n", topology.ErrUnknownLinkType, `GPU0/NIC0 cell "QPI"`},
		{"CPU list shifted into NUMA", "GPU0 GPU1 CPU Affinity NUMA Affinity\nGPU0 X NV18 0-7\nGPU1 NV18 X 0-7\n\n", topology.ErrSyntax, "cannot tell which cell is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTopo(strings.NewReader(tt.in))
			var pe *topology.ParseError
			if !errors.As(err, &pe) || !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %v, want a one-line ParseError wrapping %v saying %q", err, tt.want, tt.msg)
			}
		})
	}
}

func TestCheckDeviceCPUsWarns(t *testing.T) {
	_, m := buildTopo(t, public(t, "nvidia-smi-topo-m-h100-8gpu-nv18-2nic-4numa-vllm6732.txt"))
	var got []string
	n := topology.CheckDeviceCPUs(m, cpus(t, "0-111"), func(f string, a ...any) { got = append(got, f) })
	if n != 8 || len(got) != 8 {
		t.Errorf("warned about %d devices, want 8 (every GPU has HT siblings above 111)", n)
	}
	if len(m.Devices[0].CPUs) != 56 {
		t.Errorf("list not kept: %d CPUs", len(m.Devices[0].CPUs))
	}
}
