package amdsmi

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// GPU is one GPU, or one partition of a GPU, as amd-smi identifies it and
// reports its use. Fields a source does not give keep their unknown value.
type GPU struct {
	Index       int    // amd-smi's GPU index ("GPU: 0")
	BDF         string // the PCI address in lower case, "" if unknown
	UUID        string // "" if unknown
	Name        string // the marketing name ("AMD Instinct MI355X"), "" if unknown
	HIPID       int    // HIP's index of the device, which can differ from Index; -1 if unknown
	PartitionID int    // the partition within the GPU, 0 if none or unknown
	// MemUsedMiB and MemTotalMiB are VRAM use (amd-smi's "MB"); -1 if unknown.
	MemUsedMiB, MemTotalMiB int64
	Processes               int // processes using the GPU, -1 if unknown
}

// NewGPU returns a GPU with the given index and every other field unknown.
func NewGPU(index int) GPU {
	return GPU{Index: index, HIPID: -1, MemUsedMiB: -1, MemTotalMiB: -1, Processes: -1}
}

// merge fills the unknown fields of g from o.
func (g *GPU) merge(o GPU) {
	g.BDF = cmp.Or(g.BDF, o.BDF)
	g.UUID = cmp.Or(g.UUID, o.UUID)
	g.Name = cmp.Or(g.Name, o.Name)
	g.PartitionID = cmp.Or(g.PartitionID, o.PartitionID)
	fillNegative(&g.HIPID, o.HIPID)
	fillNegative(&g.MemUsedMiB, o.MemUsedMiB)
	fillNegative(&g.MemTotalMiB, o.MemTotalMiB)
	fillNegative(&g.Processes, o.Processes)
}

// fillNegative sets *dst to v when *dst is negative (unknown).
func fillNegative[T int | int64](dst *T, v T) {
	if *dst < 0 {
		*dst = v
	}
}

// keyName normalises "HIP-ID", "hip_id", "Partition ID" to "HIP_ID" etc.
func keyName(s string) string {
	return strings.NewReplacer("-", "_", " ", "_").Replace(strings.ToUpper(strings.TrimSpace(s)))
}

// setIdentity stores one identity key into g; unknown keys are ignored.
func setIdentity(g *GPU, key string, v any) error {
	setNum := func(dst *int) error {
		n, ok, err := jsonInt(v)
		if err == nil && (n < -1 || n > 1<<31-1) {
			err = fmt.Errorf("%w: %v", topology.ErrBadNumber, v)
		}
		if err == nil && ok && n >= 0 {
			*dst = int(n)
		}
		return err
	}
	switch keyName(key) {
	case "BDF":
		s := jsonString(v)
		b, ok := topology.NormalizePCI(s)
		if s != "" && !ok {
			return fmt.Errorf("%w: bdf %q", topology.ErrSyntax, s)
		}
		g.BDF = cmp.Or(b, g.BDF)
	case "UUID":
		g.UUID = strings.ToLower(jsonString(v))
	case "HIP_ID":
		return setNum(&g.HIPID)
	case "PARTITION_ID":
		return setNum(&g.PartitionID)
	case "OAM_ID", "NODE_ID": // not kept, but a bad one means misread columns
		return setNum(new(int))
	}
	return nil
}

// ParseListJSON parses `amd-smi list --json` ("gpu", "bdf", "uuid",
// "partition_id", newer "hip_id"); an empty list is ErrNoDevices.
func ParseListJSON(r io.Reader) ([]GPU, error) {
	const src = SourceListJSON
	objs, gpus, err := decodeGPUs(src, r)
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, topology.NewParseError(src, 0, 0, topology.ErrNoDevices, "")
	}
	out := make([]GPU, len(objs))
	for i, o := range objs {
		out[i] = NewGPU(gpus[i])
		for _, k := range slices.Sorted(maps.Keys(o)) { // a stable first error
			if err := setIdentity(&out[i], k, o[k]); err != nil {
				return nil, topology.NewParseError(src, 0, 0, fmt.Errorf("gpu %d: %s: %w", gpus[i], k, err), "")
			}
		}
	}
	return out, nil
}
