package amdsmi

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// ParseTopologyJSON parses `amd-smi topology --json` in the old schema
// (ROCm 6.0/6.1: per-GPU "weight": {"gpu_1": 15} maps, no BDFs) or the new
// one (a "links" array, any subset of its fields); "N/A" is not reported.
func ParseTopologyJSON(r io.Reader) (*Topology, error) {
	objs, gpus, err := decodeGPUs(SourceTopologyJSON, r)
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, topology.NewParseError(SourceTopologyJSON, 0, 0, topology.ErrNoDevices, "")
	}
	t := newTopology(len(objs))
	pos, byBDF := map[int]int{}, map[string]int{} // the row of each gpu and bdf
	for i, o := range objs {
		g := gpus[i]
		if _, dup := pos[g]; dup {
			return nil, jsonErr(fmt.Errorf("%w: gpu %d listed twice", topology.ErrSyntax, g))
		}
		t.GPUs[i], pos[g] = g, i
		if s := jsonString(o["bdf"]); s != "" {
			b, ok := topology.NormalizePCI(s)
			if !ok {
				return nil, jsonErr(fmt.Errorf("%w: gpu %d: bdf %q", topology.ErrSyntax, g, s))
			}
			if _, dup := byBDF[b]; dup {
				return nil, jsonErr(fmt.Errorf("%w: bdf %s listed twice", topology.ErrSyntax, b))
			}
			t.BDFs[i], byBDF[b] = b, i
		}
	}
	for i, o := range objs {
		if links, has := o["links"]; has {
			err = jsonLinks(t, i, links, pos, byBDF)
		} else if known, e := jsonOldSchema(t, i, o, pos); e != nil {
			err = e
		} else if known == 0 && len(objs) > 1 {
			err = fmt.Errorf("%w: gpu %d has neither links nor link tables", topology.ErrWrongTool, t.GPUs[i])
		}
		if err != nil {
			return nil, jsonErr(err)
		}
	}
	// The text tables whose figures the JSON gave for some pair.
	var has [5]bool // in WantTables' order
	for i := range t.Pairs {
		for j, p := range t.Pairs[i] {
			for k, ok := range [5]bool{p.Access != "", p.Weight >= 0, p.Hops >= 0, p.Type != "", p.MaxBW > 0} {
				has[k] = has[k] || (ok && i != j)
			}
		}
	}
	for k, ok := range has {
		if ok {
			t.Tables = append(t.Tables, WantTables[k])
		}
	}
	if f := t.check(); f != nil {
		return nil, jsonErr(fmt.Errorf("%w: %s: %s", topology.ErrInconsistent, f.table, f.msg))
	}
	return t, nil
}

// jsonErr makes err a *topology.ParseError of the JSON topology.
func jsonErr(err error) error {
	return topology.NewParseError(SourceTopologyJSON, 0, 0, err, "")
}

// jsonLinks reads row i's links array (the new schema).
func jsonLinks(t *Topology, i int, links any, pos map[int]int, byBDF map[string]int) error {
	g := t.GPUs[i]
	arr, ok := links.([]any)
	if !ok && links != nil {
		return fmt.Errorf("%w: gpu %d: links is not a list", topology.ErrSyntax, g)
	}
	for k, e := range arr {
		l, ok := e.(map[string]any)
		if !ok {
			return fmt.Errorf("%w: gpu %d: links[%d] is not an object", topology.ErrSyntax, g, k)
		}
		j, err := linkTarget(l, pos, byBDF)
		if err == nil {
			err = setJSONPair(&t.Pairs[i][j], l, "link_status", "weight", "num_hops", "link_type", "bandwidth")
		}
		if err != nil {
			return fmt.Errorf("gpu %d: links[%d]: %w", g, k, err)
		}
	}
	return nil
}

// jsonOldSchema reads row i's "gpu_N" maps (the old schema), returning how many.
func jsonOldSchema(t *Topology, i int, o map[string]any, pos map[int]int) (int, error) {
	g, known := t.GPUs[i], 0
	for _, kv := range oldSchemaKeys {
		key, as := kv[0], kv[1]
		mv, has := o[key]
		if !has {
			continue
		}
		mm, ok := mv.(map[string]any)
		if !ok {
			return known, fmt.Errorf("%w: gpu %d: %s is not an object", topology.ErrSyntax, g, key)
		}
		known++
		for _, name := range slices.Sorted(maps.Keys(mm)) {
			num, ok := strings.CutPrefix(name, "gpu_")
			idx, err := strconv.Atoi(num)
			if !ok || err != nil {
				return known, fmt.Errorf("%w: gpu %d: %s key %q is not gpu_N", topology.ErrSyntax, g, key, name)
			}
			j, ok := pos[idx]
			if !ok {
				return known, fmt.Errorf("%w: gpu %d: %s names unknown gpu %d", topology.ErrSyntax, g, key, idx)
			}
			if err := setJSONPair(&t.Pairs[i][j], map[string]any{as: mm[name]}, as); err != nil {
				return known, fmt.Errorf("gpu %d: %s %s: %w", g, key, name, err)
			}
		}
	}
	return known, nil
}

// oldSchemaKeys maps the old schema's maps to link fields, in a fixed
// order so that the first error is stable.
var oldSchemaKeys = [][2]string{
	{"link_accessibility", "link_status"}, {"access", "link_status"},
	{"weight", "weight"}, {"hops", "num_hops"}, {"link_type", "link_type"},
	{"numa_bandwidth", "bandwidth"},
}

// linkTarget finds the row a link points at, by "gpu", else by "bdf".
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
		b, _ := topology.NormalizePCI(s)
		if j, found := byBDF[b]; found {
			return j, nil
		}
		return 0, fmt.Errorf("%w: unknown bdf %q", topology.ErrSyntax, s)
	}
	return 0, fmt.Errorf("%w: link names no gpu or bdf", topology.ErrSyntax)
}

// linkAliases are the other names a link field has gone by.
var linkAliases = map[string][]string{
	"link_status": {"access", "link_accessibility"},
	"num_hops":    {"hops"},
	"bandwidth":   {"numa_bandwidth", "numa_bw"},
}

// setJSONPair copies the named fields of l (or their aliases) into p.
func setJSONPair(p *Pair, l map[string]any, keys ...string) error {
	for _, k := range keys {
		names := append([]string{k}, linkAliases[k]...)
		i := slices.IndexFunc(names, func(n string) bool { _, has := l[n]; return has })
		if i < 0 {
			continue
		}
		v := l[names[i]]
		var err error
		switch k {
		case "link_status":
			switch u := strings.ToUpper(jsonString(v)); u {
			case "ENABLED", "DISABLED":
				p.Access = u
			case "", "SELF":
			default:
				return fmt.Errorf("%w: link status %v", topology.ErrSyntax, v)
			}
		case "weight", "num_hops":
			n, ok, err := jsonInt(v)
			if err != nil || n < 0 || n > 1<<20 {
				return fmt.Errorf("%w: %s %v", topology.ErrBadNumber, k, v)
			}
			if ok && k == "weight" {
				p.Weight = int(n)
			} else if ok {
				p.Hops = int(n)
			}
		case "link_type":
			s, ok := v.(string)
			if !ok && v != nil {
				return fmt.Errorf("%w: %v", topology.ErrUnknownLinkType, v)
			}
			p.Type, err = linkType(s)
		case "bandwidth":
			// "min-max" or N/A, the only forms amd-smi prints.
			switch v.(type) {
			case nil, string:
				p.MinBW, p.MaxBW = 0, 0
				if s := jsonString(v); s != "" {
					p.MinBW, p.MaxBW, err = minMax(s)
				}
			default:
				return fmt.Errorf("%w: bandwidth %v", topology.ErrBadNumber, v)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}
