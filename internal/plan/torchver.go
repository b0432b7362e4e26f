package plan

import (
	"strconv"
	"strings"
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
