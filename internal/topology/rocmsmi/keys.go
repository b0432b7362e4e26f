package rocmsmi

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// unknownValue reports values rocm-smi prints when it has no answer.
func unknownValue(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "n/a", "na", "unknown", "not supported", "unsupported":
		return true
	}
	return false
}

// keys maps each key amdrun reads (lower case) to what records its known
// value, failing with a topology sentinel when it is malformed.
var keys = map[string]func(d *DeviceInfo, v string) error{
	"(topology) numa node":         func(d *DeviceInfo, v string) error { return store(&d.NUMANode, parseNUMA, v) },
	"(topology) numa affinity":     func(d *DeviceInfo, v string) error { return store(&d.NUMAAffinity, parseNUMA, v) },
	"gpu use (%)":                  func(d *DeviceInfo, v string) error { return store(&d.UtilPercent, parsePercent, v) },
	"gpu memory allocated (vram%)": func(d *DeviceInfo, v string) error { return store(&d.MemUsedPct, parsePercent, v) },
	"gpu memory use (%)":           func(d *DeviceInfo, v string) error { return store(&d.MemUsedPct, parsePercent, v) },
	"vram total memory (b)":        func(d *DeviceInfo, v string) error { return store(&d.MemTotalBytes, parseBytes, v) },
	"vram total used memory (b)":   func(d *DeviceInfo, v string) error { return store(&d.MemUsedBytes, parseBytes, v) },
	"pci bus":                      func(d *DeviceInfo, v string) error { d.PCIBus = strings.ToLower(v); return nil },
	"unique id":                    func(d *DeviceInfo, v string) error { d.UniqueID = v; return nil },
	"card series": func(d *DeviceInfo, v string) error {
		if !strings.HasPrefix(v, "0x") { // ROCm 4.x prints the vendor id (0x1002) here
			d.Name = v
		}
		return nil
	},
	"device name": func(*DeviceInfo, string) error { return nil }, // still marks rocm-smi's output
}

// store parses v into *dst; a malformed v leaves *dst as it was.
func store[T any](dst *T, parse func(string) (T, error), v string) error {
	x, err := parse(v)
	if err == nil {
		*dst = x
	}
	return err
}

// parseNUMA reads a NUMA node; -1 and 4294967295 (-1 as unsigned) are Unknown.
func parseNUMA(v string) (int, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: numa node %q", topology.ErrBadNumber, v)
	}
	switch {
	case n == -1 || n == 4294967295:
		return Unknown, nil
	case n < -1 || n > 65535:
		return 0, fmt.Errorf("%w: numa node %d out of range", topology.ErrBadNumber, n)
	}
	return int(n), nil
}

// parsePercent reads "12", "12%" or "12.5" in 0-100.
func parsePercent(v string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
	if err != nil || f < 0 || f > 100 || f != f {
		return 0, fmt.Errorf("%w: percentage %q", topology.ErrBadNumber, v)
	}
	return f, nil
}

func parseBytes(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: byte count %q", topology.ErrBadNumber, v)
	}
	return n, nil
}

// parseIndex reads a GPU index within maxDevices.
func parseIndex(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: GPU index %q", topology.ErrBadNumber, s)
	}
	if n >= maxDevices {
		return 0, fmt.Errorf("%w: GPU index %d above %d", topology.ErrSyntax, n, maxDevices-1)
	}
	return n, nil
}
