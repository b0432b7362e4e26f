package nvidiasmi

import (
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// QueryGPUFields is the field list amdrun asks `nvidia-smi --query-gpu=`
// for, in this order; rows without driver_version are accepted too.
const QueryGPUFields = "index,pci.bus_id,uuid,name,memory.total,memory.used,utilization.gpu,driver_version"

// ComputeAppsFields is the field list of `--query-compute-apps=`.
const ComputeAppsFields = "gpu_bus_id,pid,used_memory"

// GPU is one row of `nvidia-smi --query-gpu=`; a value not reported is
// "" or 0.
type GPU struct {
	Index         int    // nvidia-smi's index
	PCIAddress    string // pci.bus_id as topology.NormalizePCI writes it
	UUID          string // "GPU-..."
	Name          string // "NVIDIA H100 80GB HBM3"
	MemTotalMiB   int64
	MemUsedMiB    int64
	UtilPercent   float64 // utilization.gpu, 0-100
	DriverVersion string  // "550.54.15"
}

// ComputeApp is one row of `nvidia-smi --query-compute-apps=`: a process
// with a CUDA context on the GPU at PCIAddress.
type ComputeApp struct {
	PCIAddress string
	PID        int
}

// unknownValue says whether a CSV value is nvidia-smi's "no value".
func unknownValue(s string) bool {
	return strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") || s == "" || s == "N/A" || s == "Not Supported"
}

func known(s string) string {
	if unknownValue(s) {
		return ""
	}
	return s
}

type csvRow struct {
	line   int
	values []topology.Field
}

// readCSV reads nvidia-smi CSV into trimmed values with their columns,
// skipping blank lines and a first line starting with header.
func readCSV(r io.Reader, source, header string) ([]csvRow, error) {
	lr := topology.NewLineReader(r, source)
	var rows []csvRow
	err := lr.ForEach(func(line string) error {
		if t := strings.TrimSpace(line); t != "" && (len(rows) > 0 || !strings.HasPrefix(t, header)) {
			rows = append(rows, csvRow{lr.Line(), splitAt(line, ',')})
		}
		return nil
	})
	return rows, err
}

// parseMiB reads MiB ("81559" or "81559 MiB"); unknown values give 0.
func parseMiB(s string) (int64, bool) {
	if unknownValue(s) {
		return 0, true
	}
	s = strings.TrimSpace(strings.TrimSuffix(s, "MiB"))
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > 1<<40 {
		return 0, false
	}
	return n, true
}

// ParseQueryGPU parses `nvidia-smi --query-gpu=`QueryGPUFields
// `--format=csv,noheader,nounits`, one GPU a line, also with a header line
// or units; a value in brackets ("[N/A]") is not reported, except for
// index. Errors are *topology.ParseError with Source SourceQueryGPU.
func ParseQueryGPU(r io.Reader) ([]GPU, error) {
	rows, err := readCSV(r, SourceQueryGPU, "index")
	if err != nil {
		return nil, err
	}
	var out []GPU
	seen := map[int]bool{}
	for _, row := range rows {
		v := row.values
		if len(v) == 1 && strings.HasPrefix(v[0].S, "No devices were found") {
			return nil, topology.NewParseError(SourceQueryGPU, row.line, v[0].Col, topology.ErrNoDevices, "%s", v[0].S)
		}
		if len(v) != 7 && len(v) != 8 {
			return nil, topology.NewParseError(SourceQueryGPU, row.line, 0, topology.ErrSyntax, "%d fields, want 8 (%s)", len(v), QueryGPUFields)
		}
		idx, err := strconv.Atoi(v[0].S)
		if err != nil || idx < 0 || idx > 1<<16 {
			return nil, topology.NewParseError(SourceQueryGPU, row.line, v[0].Col, topology.ErrBadNumber, "index %q", clip(v[0].S))
		}
		if seen[idx] {
			return nil, topology.NewParseError(SourceQueryGPU, row.line, v[0].Col, topology.ErrSyntax, "GPU index %d listed twice", idx)
		}
		seen[idx] = true
		g := GPU{Index: idx}
		if !unknownValue(v[1].S) {
			pci, ok := topology.NormalizePCI(v[1].S)
			if !ok {
				return nil, topology.NewParseError(SourceQueryGPU, row.line, v[1].Col, topology.ErrSyntax, "pci.bus_id %q", clip(v[1].S))
			}
			g.PCIAddress = pci
		}
		g.UUID, g.Name = known(v[2].S), known(v[3].S)
		var ok bool
		if g.MemTotalMiB, ok = parseMiB(v[4].S); !ok {
			return nil, topology.NewParseError(SourceQueryGPU, row.line, v[4].Col, topology.ErrBadNumber, "memory.total %q", clip(v[4].S))
		}
		if g.MemUsedMiB, ok = parseMiB(v[5].S); !ok {
			return nil, topology.NewParseError(SourceQueryGPU, row.line, v[5].Col, topology.ErrBadNumber, "memory.used %q", clip(v[5].S))
		}
		if u := v[6].S; !unknownValue(u) {
			f, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(u, "%")), 64)
			if err != nil || math.IsNaN(f) || f < 0 || f > 100 {
				return nil, topology.NewParseError(SourceQueryGPU, row.line, v[6].Col, topology.ErrBadNumber, "utilization.gpu %q", clip(u))
			}
			g.UtilPercent = f
		}
		if len(v) == 8 {
			g.DriverVersion = known(v[7].S)
		}
		out = append(out, g)
	}
	if len(out) == 0 {
		return nil, topology.NewParseError(SourceQueryGPU, 0, 0, topology.ErrNoDevices, "")
	}
	return out, nil
}

// ParseComputeApps parses `nvidia-smi --query-compute-apps=`
// ComputeAppsFields `--format=csv,noheader,nounits`; empty output or "No
// running processes found" is no process. Errors are *topology.ParseError
// with Source SourceComputeApps.
func ParseComputeApps(r io.Reader) ([]ComputeApp, error) {
	rows, err := readCSV(r, SourceComputeApps, "gpu_bus_id")
	if err != nil {
		return nil, err
	}
	var out []ComputeApp
	for _, row := range rows {
		v := row.values
		if len(v) == 1 && strings.HasPrefix(v[0].S, "No running processes found") {
			continue
		}
		if len(v) != 3 {
			return nil, topology.NewParseError(SourceComputeApps, row.line, 0, topology.ErrSyntax, "%d fields, want 3 (%s)", len(v), ComputeAppsFields)
		}
		pci, ok := topology.NormalizePCI(v[0].S)
		if !ok {
			return nil, topology.NewParseError(SourceComputeApps, row.line, v[0].Col, topology.ErrSyntax, "gpu_bus_id %q", clip(v[0].S))
		}
		pid, err := strconv.Atoi(v[1].S)
		if err != nil || pid < 0 || pid > 1<<31 {
			return nil, topology.NewParseError(SourceComputeApps, row.line, v[1].Col, topology.ErrBadNumber, "pid %q", clip(v[1].S))
		}
		if _, ok := parseMiB(v[2].S); !ok {
			return nil, topology.NewParseError(SourceComputeApps, row.line, v[2].Col, topology.ErrBadNumber, "used_memory %q", clip(v[2].S))
		}
		out = append(out, ComputeApp{PCIAddress: pci, PID: pid})
	}
	return out, nil
}
