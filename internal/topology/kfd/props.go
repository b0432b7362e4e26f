package kfd

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// Props is one KFD `properties` file: key to unsigned value.
type Props map[string]uint64

// parseProps reads a KFD `properties` file: "key value" lines, the value
// an unsigned decimal; blank lines are skipped. Another shape, a repeated
// key or a bad number is a *topology.ParseError wrapping
// topology.ErrSyntax or topology.ErrBadNumber.
func parseProps(data []byte, source string) (Props, error) {
	p := make(Props, 16) // a link file has 13 keys
	line := 0
	for len(data) > 0 {
		line++
		var text []byte
		text, data, _ = bytes.Cut(data, []byte{'\n'})
		key, val, col, err := splitLine(text)
		if err != nil {
			return nil, topology.NewParseError(source, line, col, err, "")
		}
		if key == "" {
			continue
		}
		if _, dup := p[key]; dup {
			return nil, topology.NewParseError(source, line, 0, topology.ErrSyntax, "key %q given twice", key)
		}
		v, ok := parseUint(val)
		if !ok {
			return nil, topology.NewParseError(source, line, col, topology.ErrBadNumber, "%s %q", key, val)
		}
		p[key] = v
	}
	return p, nil
}

// splitLine splits "key value", with col the value's column; key is "" for
// a blank line, and col the problem's for a bad one.
func splitLine(s []byte) (key string, val []byte, col int, err error) {
	i := 0
	skip := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r') {
			i++
		}
	}
	field := func() []byte {
		start := i
		for i < len(s) && s[i] != ' ' && s[i] != '\t' && s[i] != '\r' {
			i++
		}
		return s[start:i]
	}
	skip()
	if i == len(s) {
		return "", nil, 0, nil
	}
	keyCol := i
	kb := field()
	for j := 0; j < len(kb); j++ {
		c := kb[j]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return "", nil, keyCol + j, fmt.Errorf("%w: bad character %q in key", topology.ErrSyntax, c)
		}
	}
	key = intern(kb)
	skip()
	if i == len(s) {
		return "", nil, i, fmt.Errorf("%w: key %q has no value", topology.ErrSyntax, key)
	}
	col = i
	val = field()
	skip()
	if i != len(s) {
		return "", nil, i, fmt.Errorf("%w: more than two fields", topology.ErrSyntax)
	}
	return key, val, col, nil
}

// knownKeys holds the keys KFD prints, so that a tree of thousands of
// files does not allocate each key again.
var knownKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range strings.Fields(`type version_major version_minor node_from node_to weight
		min_latency max_latency min_bandwidth max_bandwidth recommended_transfer_size
		recommended_sdma_engine_id_mask flags cpu_cores_count simd_count mem_banks_count
		caches_count io_links_count p2p_links_count cpu_core_id_base simd_id_base
		max_waves_per_simd lds_size_in_kb gds_size_in_kb num_gws wave_front_size array_count
		simd_arrays_per_engine cu_per_simd_array simd_per_cu max_slots_scratch_cu
		gfx_target_version vendor_id device_id location_id domain drm_render_minor hive_id
		num_sdma_engines num_sdma_xgmi_engines num_sdma_queues_per_engine num_cp_queues
		max_engine_clk_fcompute max_engine_clk_ccompute local_mem_size fw_version capability
		debug_prop sdma_fw_version unique_id num_xcc heap_type size_in_bytes width mem_clk_max`) {
		m[k] = k
	}
	return m
}()

func intern(b []byte) string {
	if k, ok := knownKeys[string(b)]; ok { // no allocation for the lookup
		return k
	}
	return string(b)
}

// parseUint parses an unsigned decimal without allocating, refusing signs,
// empty input and overflow.
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}
