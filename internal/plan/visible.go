package plan

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/envlist"
	"github.com/amdrun/amdrun/internal/topology"
)

// Visible-device variables amdrun reads and writes.
const (
	EnvCUDAVisible = "CUDA_VISIBLE_DEVICES"
	EnvHIPVisible  = "HIP_VISIBLE_DEVICES"
	EnvROCRVisible = "ROCR_VISIBLE_DEVICES"
	EnvCUDAOrder   = "CUDA_DEVICE_ORDER"
)

// ErrMask is wrapped by every error of ParseMask: a visible-device
// variable that amdrun cannot map onto the node's devices.
var ErrMask = errors.New("bad visible-device list")

// Mask is the narrowing of the node's devices the user made with the
// visible-device variables. The zero Mask, and a nil *Mask, narrow
// nothing.
type Mask struct {
	rocr []int // ROCR_VISIBLE_DEVICES as device indices (nil: unset)
	// vis is the HIP/CUDA list as device indices and the user's tokens
	// (visVar "": neither set).
	visVar    string
	vis       []int
	visTokens []string
	cands     []int
}

// ParseMask maps the visible-device variables of env (KEY=VAL, a later
// entry wins) onto devs. An entry is a runtime index, a UUID ("GPU-…",
// any case, or a unique prefix as CUDA allows), or, in a HIP/CUDA list
// under ROCR_VISIBLE_DEVICES, a position in the ROCR list.
//
// On NVIDIA only CUDA_VISIBLE_DEVICES counts. On AMD, ROCr applies
// ROCR_VISIBLE_DEVICES first and HIP indexes what is left with
// HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES, which must then agree. A
// HIP or CUDA list identical to the ROCR list is Slurm's copy and names
// the same devices; Env then writes the positions HIP needs.
//
// It returns an error wrapping ErrMask, naming the variable and entry,
// when an entry names no device, a device is listed twice, or a variable
// is set but empty (no GPU would be visible).
func ParseMask(env []string, devs []topology.Device) (*Mask, error) {
	vars := envlist.Map(env)
	set := func(k string) bool { _, ok := vars[k]; return ok }
	nvidia := len(devs) > 0 && devs[0].Vendor == topology.VendorNVIDIA
	m := &Mask{}
	base := Indices(devs) // every device (a model's: Index is its position), or those ROCR_VISIBLE_DEVICES leaves
	if !nvidia && set(EnvROCRVisible) {
		_, idx, err := resolveList(EnvROCRVisible, vars[EnvROCRVisible], devs, base, false)
		if err != nil {
			return nil, err
		}
		m.rocr, base = idx, idx
	}
	names := []string{EnvHIPVisible, EnvCUDAVisible}
	if nvidia {
		names = []string{EnvCUDAVisible}
	}
	for _, name := range names {
		if !set(name) {
			continue
		}
		if m.rocr != nil && sameList(vars[name], vars[EnvROCRVisible]) {
			// Slurm 22.05+ writes one list into every such variable
			// (gres_common.c), the same GPUs, not positions in ROCR's.
			continue
		}
		toks, idx, err := resolveList(name, vars[name], devs, base, m.rocr != nil)
		if err != nil {
			return nil, err
		}
		if m.visVar != "" {
			if !slices.Equal(idx, m.vis) {
				return nil, fmt.Errorf("launch: %w: %s=%q and %s=%q name different devices",
					ErrMask, m.visVar, vars[m.visVar], name, vars[name])
			}
			continue
		}
		m.visVar, m.vis, m.visTokens = name, idx, toks
	}
	switch {
	case m.visVar != "":
		m.cands = sortedCopy(m.vis)
	case m.rocr != nil:
		m.cands = sortedCopy(m.rocr)
	}
	return m, nil
}

// resolveList maps a comma-separated list onto device indices (numbers:
// runtime indices, or positions within base when positional).
func resolveList(name, val string, devs []topology.Device, base []int, positional bool) ([]string, []int, error) {
	if strings.TrimSpace(val) == "" {
		return nil, nil, fmt.Errorf("launch: %w: %s is set but empty: no GPU would be visible", ErrMask, name)
	}
	var toks []string
	var idx []int
	for _, raw := range strings.Split(val, ",") {
		tok := strings.TrimSpace(raw)
		d, err := resolveToken(tok, devs, base, positional)
		if err != nil {
			return nil, nil, fmt.Errorf("launch: %w: %s=%q: entry %q %v", ErrMask, name, val, tok, err)
		}
		if slices.Contains(idx, d) {
			return nil, nil, fmt.Errorf("launch: %w: %s=%q: entry %q names device %d twice", ErrMask, name, val, tok, d)
		}
		toks = append(toks, tok)
		idx = append(idx, d)
	}
	return toks, idx, nil
}

func resolveToken(tok string, devs []topology.Device, base []int, positional bool) (int, error) {
	if tok == "" {
		return 0, errors.New("is empty")
	}
	if n, err := strconv.Atoi(tok); err == nil {
		if positional {
			if n < 0 || n >= len(base) {
				return 0, fmt.Errorf("is outside the %d devices ROCR_VISIBLE_DEVICES leaves", len(base))
			}
			return base[n], nil
		}
		if k := slices.IndexFunc(base, func(i int) bool { return devs[i].RuntimeIndex == n }); k >= 0 {
			return base[k], nil
		}
		return 0, errors.New("names no device")
	}
	want := normUUID(tok)
	if want == "" {
		return 0, errors.New("is neither an index nor a GPU UUID")
	}
	// An exact match wins; otherwise a prefix must be unique, as in CUDA.
	var exact, prefix []int
	for _, i := range base {
		u := normUUID(devs[i].UniqueID)
		switch {
		case u == "":
		case u == want:
			exact = append(exact, i)
		case strings.HasPrefix(u, want):
			prefix = append(prefix, i)
		}
	}
	if len(exact) == 0 {
		exact = prefix
	}
	switch len(exact) {
	case 0:
		return 0, errors.New("names no device")
	case 1:
		return exact[0], nil
	}
	return 0, fmt.Errorf("matches %d devices (partitions share a UUID: use indices)", len(exact))
}

// normUUID lowers a UUID and drops "GPU-" and AMD's "0x"; "" for a string
// that is no UUID.
func normUUID(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.TrimPrefix(s, "gpu-")
	s = strings.TrimPrefix(s, "0x")
	if strings.Trim(s, "0123456789abcdef-") != "" {
		return "" // a character no UUID has
	}
	return s
}

// Candidates returns the indices (Device.Index) of the devices the user
// left visible, ascending, or nil when no visible-device variable is set.
func (m *Mask) Candidates() []int {
	if m == nil || m.cands == nil {
		return nil
	}
	return append([]int(nil), m.cands...)
}

// Within returns the mask narrowed to allowed (device indices, such as a
// scheduler's grant; nil bounds nothing) and the devices the user's list
// left visible outside it. When none is left it returns an error
// wrapping ErrMask that names what allowed is.
func (m *Mask) Within(allowed []int, what string) (*Mask, []int, error) {
	if allowed == nil {
		return m, nil, nil
	}
	out := &Mask{}
	if m != nil {
		*out = *m
	}
	if out.cands == nil {
		out.cands = sortedCopy(allowed)
		return out, nil, nil
	}
	granted := func(c int) bool { return slices.Contains(allowed, c) }
	keep := slices.DeleteFunc(slices.Clone(out.cands), func(c int) bool { return !granted(c) })
	if len(keep) == 0 {
		name := cmp.Or(out.visVar, EnvROCRVisible)
		return nil, nil, fmt.Errorf("launch: %w: %s leaves devices %s visible, none of which %s grants",
			ErrMask, name, topology.JoinInts(out.cands), what)
	}
	dropped := slices.DeleteFunc(slices.Clone(out.cands), granted)
	out.cands = keep
	return out, dropped, nil
}

// Narrow returns the devices of list (nil: all) the mask leaves visible,
// in list's order; nil when neither restricts anything.
func (m *Mask) Narrow(list []int) []int {
	if list == nil {
		return m.Candidates()
	}
	return slices.DeleteFunc(slices.Clone(list), func(d int) bool { return !m.Allows(d) })
}

// Allows says whether the device with index i is visible under the mask.
func (m *Mask) Allows(i int) bool {
	return m == nil || m.cands == nil || slices.Contains(m.cands, i)
}

// Check returns an error wrapping ErrMask when a chosen device is not
// visible under the mask; Env needs chosen to pass it.
func (m *Mask) Check(chosen []topology.Device) error {
	for _, d := range chosen {
		if !m.Allows(d.Index) {
			return fmt.Errorf("launch: %w: device %d is not in the visible set %s", ErrMask, d.Index, topology.JoinInts(m.cands))
		}
	}
	return nil
}

// Env returns HIP_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES (and
// CUDA_DEVICE_ORDER=PCI_BUS_ID on NVIDIA) that show the workers exactly
// chosen, in order: the user's own tokens under a HIP/CUDA list,
// positions under ROCR_VISIBLE_DEVICES (left as set), else runtime
// indices. Chosen must pass Check.
func (m *Mask) Env(chosen []topology.Device, vendor topology.Vendor) map[string]string {
	toks := make([]string, len(chosen))
	for r, d := range chosen {
		toks[r] = m.token(d)
	}
	list := strings.Join(toks, ",")
	out := map[string]string{EnvCUDAVisible: list, EnvHIPVisible: list}
	if vendor == topology.VendorNVIDIA {
		out[EnvCUDAOrder] = "PCI_BUS_ID"
	}
	return out
}

func (m *Mask) token(d topology.Device) string {
	if m != nil {
		if k := slices.Index(m.vis, d.Index); k >= 0 {
			return m.visTokens[k]
		}
		if k := slices.Index(m.rocr, d.Index); k >= 0 {
			return strconv.Itoa(k)
		}
	}
	return strconv.Itoa(d.RuntimeIndex)
}

// sameList says whether two comma-separated lists are equal but for
// spaces.
func sameList(a, b string) bool {
	return slices.EqualFunc(strings.Split(a, ","), strings.Split(b, ","), func(x, y string) bool {
		return strings.TrimSpace(x) == strings.TrimSpace(y)
	})
}

func sortedCopy(a []int) []int {
	c := append([]int{}, a...)
	slices.Sort(c)
	return c
}
