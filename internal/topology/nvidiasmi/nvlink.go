package nvidiasmi

import (
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// NVLinkStatus is `nvidia-smi nvlink -s`: every GPU's NVLinks, in order.
type NVLinkStatus struct {
	GPUs []NVLinkGPU
}

// NVLinkGPU is one GPU block of `nvidia-smi nvlink -s`.
type NVLinkGPU struct {
	Index int // the N of "GPU N:", nvidia-smi's index
	Links []NVLink
}

// NVLink is one link of a GPU.
type NVLink struct {
	SpeedMBps int64 // 26.562 GB/s is 26562; 0 when "<inactive>"
}

// LinkSpeed returns the slowest MB/s of the GPU's active links, or 0.
func (g *NVLinkGPU) LinkSpeed() int64 {
	var min int64
	for _, l := range g.Links {
		if l.SpeedMBps > 0 && (min == 0 || l.SpeedMBps < min) {
			min = l.SpeedMBps
		}
	}
	return min
}

// GPU returns the block of the GPU with nvidia-smi index i, or nil.
func (s *NVLinkStatus) GPU(i int) *NVLinkGPU {
	if s == nil {
		return nil
	}
	if k := slices.IndexFunc(s.GPUs, func(g NVLinkGPU) bool { return g.Index == i }); k >= 0 {
		return &s.GPUs[k]
	}
	return nil
}

var (
	nvlGPULine  = topology.LazyRegexp(`^GPU (\d+): (.*)$`)
	nvlLinkLine = topology.LazyRegexp(`^Link (\d+): (.*)$`)
	nvlSpeed    = topology.LazyRegexp(`^(\d{1,9}(?:\.\d{1,9})?) ?(GB/s|MB/s)$`)
)

// ParseNVLinkStatus parses `nvidia-smi nvlink -s` ("GPU 0: NVIDIA H200
// (UUID: ...)", then lines "Link 0: 26.562 GB/s" or "Link 1: <inactive>").
// Empty input and "all links are inActive" (PCIe-only GPUs) give no GPUs.
// Errors are *topology.ParseError with Source SourceNVLink.
func ParseNVLinkStatus(r io.Reader) (*NVLinkStatus, error) {
	lr := topology.NewLineReader(r, SourceNVLink)
	st := &NVLinkStatus{}
	seen := map[int]bool{}
	var seenLink map[int]bool
	err := lr.ForEach(func(line string) error {
		text := strings.TrimSpace(line)
		col := strings.Index(line, text)
		// "NVML: ... all links are inActive": a GPU without active NVLinks
		// (PCIe boards), not malformed output.
		if l := strings.ToLower(text); text == "" || strings.HasPrefix(l, "nvml:") && strings.Contains(l, "all links are inactive") {
			return nil
		}
		if mm := nvlGPULine().FindStringSubmatch(text); mm != nil {
			idx, err := strconv.Atoi(mm[1])
			if err != nil || idx > 1<<20 {
				return lr.Errorf(col+4, topology.ErrBadNumber, "GPU index %q", clip(mm[1]))
			}
			if seen[idx] {
				return lr.Errorf(col, topology.ErrSyntax, "GPU %d listed twice", idx)
			}
			seen[idx] = true
			st.GPUs = append(st.GPUs, NVLinkGPU{Index: idx})
			seenLink = map[int]bool{}
			return nil
		}
		mm := nvlLinkLine().FindStringSubmatch(text)
		if mm == nil {
			return lr.Errorf(col, topology.ErrSyntax, "unexpected line %q", clip(text))
		}
		if len(st.GPUs) == 0 {
			return lr.Errorf(col, topology.ErrSyntax, "link line before any GPU line")
		}
		n, err := strconv.Atoi(mm[1])
		if err != nil || n > 1<<16 {
			return lr.Errorf(col+5, topology.ErrBadNumber, "link number %q", clip(mm[1]))
		}
		g := &st.GPUs[len(st.GPUs)-1]
		if seenLink[n] {
			return lr.Errorf(col, topology.ErrSyntax, "GPU %d link %d listed twice", g.Index, n)
		}
		seenLink[n] = true
		val := strings.TrimSpace(mm[2])
		valCol := col + strings.Index(text, ": ") + 2
		var l NVLink
		if val != "<inactive>" {
			sm := nvlSpeed().FindStringSubmatch(val)
			if sm == nil {
				return lr.Errorf(valCol, topology.ErrBadNumber, "GPU %d link %d speed %q", g.Index, n, clip(val))
			}
			f, _ := strconv.ParseFloat(sm[1], 64)
			if sm[2] == "GB/s" {
				f *= 1000
			}
			l.SpeedMBps = int64(math.Round(f))
		}
		g.Links = append(g.Links, l)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}
