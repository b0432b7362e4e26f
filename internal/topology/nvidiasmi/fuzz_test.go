package nvidiasmi

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

// seed adds every file matching pattern under the shared public fixtures
// and every hand-made fixture of kind what.
func seed(f *testing.F, pattern, what string) {
	f.Helper()
	files, _ := filepath.Glob(testutil.Public(f, pattern))
	for _, m := range machines {
		files = append(files, testutil.Testdata(f, "nvidia-smi", m+"."+what+".txt"))
	}
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// fuzzTopo is the topology the non-topo fuzz targets build with.
func fuzzTopo(f *testing.F, machine string) *Topo {
	f.Helper()
	topo, err := ParseTopo(bytes.NewReader(handmade(f, machine, "topo-m")))
	if err != nil {
		f.Fatal(err)
	}
	return topo
}

// mustBuild checks that Build accepts parsed input and the model validates.
func mustBuild(t *testing.T, topo *Topo, nvl *NVLinkStatus, gpus []GPU, apps []ComputeApp) {
	t.Helper()
	m, err := Build(topo, nvl, gpus, apps, nil)
	if err != nil {
		t.Fatalf("Build of parsed input: %v", err)
	}
	if err := m.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

func FuzzParseTopo(f *testing.F) {
	seed(f, "nvidia-smi-topo-*", "topo-m")
	f.Add([]byte("GPU0 GPU1\nGPU0 X NV4\nGPU1 NV4 X\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		topo, err := ParseTopo(bytes.NewReader(data))
		if err != nil {
			if _, ok := err.(*topology.ParseError); !ok {
				t.Fatalf("error %T %v is not a *ParseError", err, err)
			}
			return
		}
		for i := range topo.Cells {
			for j := range topo.Cells {
				if topo.Cells[i][j] != topo.Cells[j][i] {
					t.Fatalf("asymmetric %d-%d", i, j)
				}
			}
		}
		mustBuild(t, topo, nil, nil, nil)
	})
}

func FuzzParseP2P(f *testing.F) {
	seed(f, "nvidia-smi-topo-p2p-*", "topo-m")
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseP2P(bytes.NewReader(data))
		if err != nil {
			return
		}
		for i, row := range p.Status {
			if len(row) != len(p.Status) || row[i] != "X" {
				t.Fatalf("row %d = %q", i, row)
			}
		}
		// What Discover does with it: mark a model of as many GPUs.
		n := len(p.Status)
		if n == 0 || n > topology.MaxDevices {
			return
		}
		m := &topology.Model{Source: Source}
		for i := 0; i < n; i++ {
			m.Devices = append(m.Devices, topology.Device{Index: i, RuntimeIndex: i, NUMANode: -1})
		}
		if err := m.Finish(); err != nil {
			t.Fatal(err)
		}
		if err := markP2P(m, p); err != nil {
			t.Fatal(err)
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("marked model does not validate: %v", err)
		}
	})
}

func FuzzParseNVLinkStatus(f *testing.F) {
	seed(f, "no-such-fixture-*", "nvlink-s")
	f.Add([]byte("GPU 0: Tesla V100 (UUID: GPU-1)\n\t Link 0: 25.781 GB/s\n\t Link 1: <inactive>\n"))
	f.Add([]byte("NVML: Unable to retrieve NVLink information as all links are inActive\n"))
	topo := fuzzTopo(f, "hgx-h100-8gpu")
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseNVLinkStatus(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, g := range st.GPUs {
			for _, l := range g.Links {
				if l.SpeedMBps < 0 {
					t.Fatalf("GPU %d link %+v", g.Index, l)
				}
			}
		}
		mustBuild(t, topo, st, nil, nil)
	})
}

func FuzzParseQueryGPU(f *testing.F) {
	seed(f, "no-such-fixture-*", "query-gpu")
	f.Add([]byte("1, [N/A], [N/A], [Not Supported], [N/A], 12 MiB, 5 %\n"))
	topo := fuzzTopo(f, "h200-2gpu-nv18")
	f.Fuzz(func(t *testing.T, data []byte) {
		gpus, err := ParseQueryGPU(bytes.NewReader(data))
		if err != nil {
			return
		}
		mustBuild(t, topo, nil, gpus, nil)
	})
}

func FuzzParseComputeApps(f *testing.F) {
	seed(f, "no-such-fixture-*", "compute-apps")
	f.Add([]byte("00000000:4F:00.0, 1, [N/A]\n"))
	topo := fuzzTopo(f, "h200-2gpu-nv18")
	gpus, err := ParseQueryGPU(bytes.NewReader(handmade(f, "h200-2gpu-nv18", "query-gpu")))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		apps, err := ParseComputeApps(bytes.NewReader(data))
		if err != nil {
			return
		}
		mustBuild(t, topo, nil, gpus, apps)
	})
}

// FuzzDiscover feeds Discover topo -m, --query-gpu and nvlink -s at once,
// so that the check between calls (as many GPUs in each) and the reading
// of inactive NVLinks meet arbitrary outputs: nothing may panic, an
// error is one line, and a model must validate.
func FuzzDiscover(f *testing.F) {
	for _, m := range machines {
		f.Add(handmade(f, m, "topo-m"), handmade(f, m, "query-gpu"), handmade(f, m, "nvlink-s"), handmade(f, m, "topo-p2p-r"))
	}
	f.Add(handmade(f, "pcie-l40s-8gpu-2socket", "topo-m"), handmade(f, "pcie-l40s-8gpu-2socket", "query-gpu"),
		[]byte("NVML: Unable to retrieve NVLink information as all links are inActive\n"), []byte{})
	f.Fuzz(func(t *testing.T, topo, query, nvlink, p2p []byte) {
		run := func(_ context.Context, name string, args ...string) ([]byte, error) {
			switch strings.Join(args, " ") {
			case strings.Join(argsTopo, " "):
				return topo, nil
			case strings.Join(argsQueryGPU, " "):
				return query, nil
			case strings.Join(argsNVLink, " "):
				return nvlink, nil
			case strings.Join(argsP2P, " "):
				return p2p, nil
			}
			return nil, nil // no compute apps
		}
		m, err := Discover(context.Background(), run, nil)
		testutil.CheckOutcome(t, err, func() error { return m.Validate() })
	})
}
