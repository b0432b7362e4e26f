package amdsmi

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// ParseTopologyJSON parses `amd-smi topology --json` in either schema:
//
//   - old (ROCm 6.0/6.1): [{"gpu": 0, "link_accessibility": {"gpu_1":
//     "ENABLED"}, "weight": {"gpu_1": 15}, "hops": {...}, "link_type":
//     {...}, "numa_bandwidth": {"gpu_1": "50000-50000"}}], no BDFs;
//   - new: [{"gpu": 0, "bdf": "0000:0c:00.0", "links": [{"gpu": 1, "bdf":
//     ..., "weight": 15, "link_status": "ENABLED", "link_type": "XGMI",
//     "num_hops": 1, "bandwidth": "50000-50000"}]}], with any subset of the
//     link fields (as `-a -t` prints).
//
// Numbers may be JSON numbers, numeric strings or {"value": n}; "N/A" means
// not reported. Rows keep the tool's order. Errors are *topology.ParseError
// values; only JSON syntax errors carry a line.
func ParseTopologyJSON(r io.Reader) (*Topology, error) {
	const src = SourceTopologyJSON
	objs, err := decodeGPUs(src, r)
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, &topology.ParseError{Source: src, Err: topology.ErrNoDevices}
	}
	perr := func(format string, args ...any) error {
		return &topology.ParseError{Source: src, Err: fmt.Errorf(format, args...)}
	}
	t := newTopology(len(objs))
	pos := map[int]int{}
	for i, o := range objs {
		g, err := gpuIndex(src, i, o)
		if err != nil {
			return nil, err
		}
		if _, dup := pos[g]; dup {
			return nil, perr("%w: gpu %d listed twice", topology.ErrSyntax, g)
		}
		pos[g] = i
		t.GPUs[i] = g
		if s := jsonString(o["bdf"]); s != "" {
			b, ok := normBDF(s)
			if !ok {
				return nil, perr("%w: gpu %d: bdf %q", topology.ErrSyntax, g, s)
			}
			t.BDFs[i] = b
		}
	}
	byBDF := map[string]int{}
	for i, b := range t.BDFs {
		if b == "" {
			continue
		}
		if _, dup := byBDF[b]; dup {
			return nil, perr("%w: bdf %s listed twice", topology.ErrSyntax, b)
		}
		byBDF[b] = i
	}
	for i, o := range objs {
		g := t.GPUs[i]
		if links, has := o["links"]; has {
			arr, ok := links.([]any)
			if !ok && links != nil {
				return nil, perr("%w: gpu %d: links is not a list", topology.ErrSyntax, g)
			}
			for k, e := range arr {
				l, ok := e.(map[string]any)
				if !ok {
					return nil, perr("%w: gpu %d: links[%d] is not an object", topology.ErrSyntax, g, k)
				}
				j, err := linkTarget(l, pos, byBDF)
				if err != nil {
					return nil, perr("gpu %d: links[%d]: %w", g, k, err)
				}
				if err := setJSONPair(&t.Pairs[i][j], l, "link_status", "weight", "num_hops", "link_type", "bandwidth"); err != nil {
					return nil, perr("gpu %d: links[%d]: %w", g, k, err)
				}
			}
			continue
		}
		// Old schema: one map per property, keyed "gpu_N".
		known := 0
		for _, kv := range oldSchemaKeys {
			key, as := kv[0], kv[1]
			mv, has := o[key]
			if !has {
				continue
			}
			mm, ok := mv.(map[string]any)
			if !ok {
				return nil, perr("%w: gpu %d: %s is not an object", topology.ErrSyntax, g, key)
			}
			known++
			names := make([]string, 0, len(mm))
			for name := range mm {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				val := mm[name]
				num, ok := strings.CutPrefix(name, "gpu_")
				idx, err := strconv.Atoi(num)
				if !ok || err != nil {
					return nil, perr("%w: gpu %d: %s key %q is not gpu_N", topology.ErrSyntax, g, key, name)
				}
				j, ok := pos[idx]
				if !ok {
					return nil, perr("%w: gpu %d: %s names unknown gpu %d", topology.ErrSyntax, g, key, idx)
				}
				if err := setJSONPair(&t.Pairs[i][j], map[string]any{as: val}, as); err != nil {
					return nil, perr("gpu %d: %s %s: %w", g, key, name, err)
				}
			}
		}
		if known == 0 && len(objs) > 1 {
			return nil, perr("%w: gpu %d has neither links nor link tables", topology.ErrWrongTool, g)
		}
	}
	return t, nil
}

// oldSchemaKeys maps the old schema's per-property maps to link fields,
// in a fixed order so that the first error reported is stable.
var oldSchemaKeys = [][2]string{
	{"link_accessibility", "link_status"}, {"access", "link_status"},
	{"weight", "weight"}, {"hops", "num_hops"}, {"link_type", "link_type"},
	{"numa_bandwidth", "bandwidth"},
}

// linkTarget finds the row a new-schema link points at, by "gpu" index or
// else by "bdf".
func linkTarget(l map[string]any, pos map[int]int, byBDF map[string]int) (int, error) {
	if v, has := l["gpu"]; has {
		n, ok, err := jsonInt(v)
		if err != nil || !ok {
			return 0, fmt.Errorf("%w: gpu %v", topology.ErrBadNumber, v)
		}
		j, found := pos[int(n)]
		if n < 0 || n > 1<<20 || !found {
			return 0, fmt.Errorf("%w: unknown gpu %d", topology.ErrSyntax, n)
		}
		return j, nil
	}
	if s := jsonString(l["bdf"]); s != "" {
		b, _ := normBDF(s)
		if j, found := byBDF[b]; found {
			return j, nil
		}
		return 0, fmt.Errorf("%w: unknown bdf %q", topology.ErrSyntax, s)
	}
	return 0, fmt.Errorf("%w: link names no gpu or bdf", topology.ErrSyntax)
}

// setJSONPair copies the named fields of l into p.
func setJSONPair(p *Pair, l map[string]any, keys ...string) error {
	for _, k := range keys {
		var v any
		var has bool
		switch k {
		case "link_status":
			v, has = lookup(l, "link_status", "access", "link_accessibility")
		case "num_hops":
			v, has = lookup(l, "num_hops", "hops")
		case "bandwidth":
			v, has = lookup(l, "bandwidth", "numa_bandwidth", "numa_bw")
		default:
			v, has = l[k]
		}
		if !has {
			continue
		}
		switch k {
		case "link_status":
			switch u := strings.ToUpper(jsonString(v)); u {
			case "ENABLED", "DISABLED":
				p.Access = u
			case "", "SELF":
			default:
				if b, ok := v.(bool); ok {
					p.Access = map[bool]string{true: "ENABLED", false: "DISABLED"}[b]
					continue
				}
				return fmt.Errorf("%w: link status %v", topology.ErrSyntax, v)
			}
		case "weight", "num_hops":
			n, ok, err := jsonInt(v)
			if err != nil || n < 0 || n > 1<<20 {
				return fmt.Errorf("%w: %s %v", topology.ErrBadNumber, k, v)
			}
			if !ok {
				continue
			}
			if k == "weight" {
				p.Weight = int(n)
			} else {
				p.Hops = int(n)
			}
		case "link_type":
			s, ok := v.(string)
			if !ok && v != nil {
				return fmt.Errorf("%w: %v", topology.ErrUnknownLinkType, v)
			}
			t, err := linkType(s)
			if err != nil {
				return err
			}
			p.Type = t
		case "bandwidth":
			lo, hi, err := jsonBandwidth(v)
			if err != nil {
				return err
			}
			p.MinBW, p.MaxBW = lo, hi
		}
	}
	return nil
}

// jsonBandwidth reads a NUMA bandwidth: "min-max", a number (max), N/A,
// or an object {"min": a, "max": b} (each possibly {"value": n}).
func jsonBandwidth(v any) (int64, int64, error) {
	switch x := v.(type) {
	case nil:
		return 0, 0, nil
	case string:
		s := strings.TrimSpace(x)
		if s == "" || strings.EqualFold(s, "N/A") {
			return 0, 0, nil
		}
		return minMax(s)
	case json.Number:
		n, ok, err := jsonInt(x)
		if err != nil || !ok || n < 0 || n > 1<<40 {
			return 0, 0, fmt.Errorf("%w: bandwidth %v", topology.ErrBadNumber, x)
		}
		return n, n, nil
	case map[string]any:
		if _, has := x["value"]; has {
			return jsonBandwidth(x["value"])
		}
		lo, ok1, err1 := jsonInt(x["min"])
		hi, ok2, err2 := jsonInt(x["max"])
		if err1 != nil || err2 != nil || lo < 0 || hi < 0 || lo > 1<<40 || hi > 1<<40 {
			return 0, 0, fmt.Errorf("%w: bandwidth %v", topology.ErrBadNumber, v)
		}
		if !ok1 {
			lo = hi
		}
		if !ok2 {
			hi = lo
		}
		if lo > hi {
			lo, hi = hi, lo
		}
		return lo, hi, nil
	}
	return 0, 0, fmt.Errorf("%w: bandwidth %v", topology.ErrBadNumber, v)
}
