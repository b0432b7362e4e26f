package plan

import (
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/envlist"
)

// TorchVersionProbe is a Python program that prints the version of the
// torch its interpreter would import, without importing it (torch takes
// seconds to import, this about as long as the interpreter's start): it
// reads torch/version.py. It prints nothing when there is no torch.
const TorchVersionProbe = `import importlib.util as u, os, re
s = u.find_spec("torch")
if s and s.submodule_search_locations:
    p = os.path.join(list(s.submodule_search_locations)[0], "version.py")
    try:
        m = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", open(p).read())
        print(m.group(1) if m else "")
    except OSError:
        pass
`

// ParseTorchVersion returns the version TorchVersionProbe printed, or ""
// when it is not a version ("2.11.0+cu130", "1.13.1").
func ParseTorchVersion(out []byte) string {
	v := strings.TrimSpace(string(out))
	if _, _, ok := majorMinor(v); !ok {
		return ""
	}
	return v
}

// legacyAsyncName says whether torch version v reads only the old name of
// the NCCL async error handling variable (before 2.2). An unknown version
// ("") says no: current torch warns on every rank that the old name is
// deprecated.
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

// Torch's flight recorder (issue 33): a ring buffer of each rank's last
// collectives (process group, sequence number, op, sizes, state), which
// torch writes to a file per rank when NCCL's watchdog times out. It is
// off unless its buffer size is set. Read in torch's sources: the
// recorder and TORCH_NCCL_TRACE_BUFFER_SIZE, TORCH_NCCL_DUMP_ON_TIMEOUT
// and TORCH_NCCL_DEBUG_INFO_TEMP_FILE came in torch 2.2 (pytorch#110960,
// #113503); the vendor-neutral names TORCH_FR_BUFFER_SIZE and
// TORCH_FR_DUMP_TEMP_FILE replaced the first and the last (pytorch#152563
// and after; 2.11 reads them and records gloo collectives too), the old
// names still read with a deprecation warning.
var (
	frBufferVars    = [2]string{"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"}
	frDumpFileVars  = [2]string{"TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"}
	frDumpOnTimeout = "TORCH_NCCL_DUMP_ON_TIMEOUT"
)

// FRBufferSize is the number of collectives the recorder keeps per rank
// when amdrun switches it on (torch's tutorial's figure).
const FRBufferSize = "2000"

// frNames says which name of each pair amdrun sets for torch version v:
// the new one from 2.9 (the rename was merged while 2.8 was developed,
// first under another name: 2.8 is given the old name, which every
// release since 2.2 reads, at worst with a warning), none before 2.2 or
// for an unknown version.
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

// flightRecorderVars are the variables that switch the flight recorder
// on for torch version v: its buffer, unless the user set either name,
// and its dump on a watchdog timeout, unless the user set that.
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

// FRDumpFileVar is the variable that names the prefix of the flight
// recorder's dump files for the torch version a rank's env was planned
// for (its buffer variable says which), or "" when the recorder is off
// or the user named the files.
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
