package plan

import (
	_ "embed"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/envlist"
)

// TorchVersionProbe is a Python program that prints the version of the
// torch its interpreter would import, read from torch/version.py (an
// import takes seconds); nothing when there is no torch.
//
//go:embed torchver.py
var TorchVersionProbe string

// ParseTorchVersion returns the version TorchVersionProbe printed, or ""
// when it is not a version ("2.11.0+cu130", "1.13.1").
func ParseTorchVersion(out []byte) string {
	v := strings.TrimSpace(string(out))
	if _, _, ok := majorMinor(v); !ok {
		return ""
	}
	return v
}

// legacyAsyncName says whether torch version v is before 2.2 (an unknown
// one is not).
func legacyAsyncName(v string) bool {
	major, minor, ok := majorMinor(v)
	return ok && (major < 2 || major == 2 && minor < 2)
}

func majorMinor(v string) (int, int, bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minorDigits := parts[1]
	if i := strings.IndexFunc(minorDigits, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minorDigits = minorDigits[:i]
	}
	minor, err2 := strconv.Atoi(minorDigits)
	return major, minor, err1 == nil && err2 == nil && major >= 0 && minor >= 0
}

// Torch's flight recorder (issue 33) keeps each rank's last collectives
// and writes them to a file when NCCL's watchdog times out; it is off
// unless its buffer size is set. The NCCL names came in torch 2.2
// (pytorch#110960, #113503); the TORCH_FR_ names replaced them
// (pytorch#152563), the old ones still read with a warning.
var (
	frBufferVars    = [2]string{"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"}
	frDumpFileVars  = [2]string{"TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"}
	frDumpOnTimeout = "TORCH_NCCL_DUMP_ON_TIMEOUT"
)

// FRBufferSize is the number of collectives the recorder keeps per rank
// when amdrun switches it on (torch's tutorial's figure).
const FRBufferSize = "2000"

// frNames says which name of each pair to set for torch version v: the
// new one from 2.9 (2.8 got the rename under another name), the old one
// from 2.2, none before or for an unknown version.
func frNames(v string) (buffer, dumpFile string, ok bool) {
	major, minor, known := majorMinor(v)
	switch {
	case !known || major < 2 || major == 2 && minor < 2:
		return "", "", false
	case major == 2 && minor < 9:
		return frBufferVars[1], frDumpFileVars[1], true
	}
	return frBufferVars[0], frDumpFileVars[0], true
}

// flightRecorderVars switch the flight recorder on for torch version v,
// each unless the user set it.
func flightRecorderVars(v string, env []string) map[string]string {
	buffer, _, ok := frNames(v)
	if !ok {
		return nil
	}
	set := map[string]string{}
	if _, a := envlist.Lookup(env, frBufferVars[0]); !a {
		if _, b := envlist.Lookup(env, frBufferVars[1]); !b {
			set[buffer] = FRBufferSize
		}
	}
	if _, ok := envlist.Lookup(env, frDumpOnTimeout); !ok {
		set[frDumpOnTimeout] = "1"
	}
	return set
}

// FRDumpFileVar is the variable naming the prefix of the flight
// recorder's dump files for the torch a rank's env was planned for, or
// "" when the recorder is off or the user named the files.
func FRDumpFileVar(env []string) string {
	for i, b := range frBufferVars {
		if _, ok := envlist.Lookup(env, b); ok {
			for _, d := range frDumpFileVars {
				if _, set := envlist.Lookup(env, d); set {
					return ""
				}
			}
			return frDumpFileVars[i]
		}
	}
	return ""
}
