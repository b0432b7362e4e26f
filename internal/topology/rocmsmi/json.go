package rocmsmi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// jsonSource names rocm-smi --json output in errors.
const jsonSource = "rocm-smi --json"

var (
	cardKey = regexp.MustCompile(`^card(\d+)$`)
	// topoKey matches the system object's flattened matrices.
	topoKey = regexp.MustCompile(`^\(Topology\) (Weight|Hops|Link type) between DRM devices (\d+) and (\d+)$`)
)

// ParseJSON parses the output of rocm-smi ... --json: per-card "cardN"
// objects (Numa Node and Affinity, PCI Bus, Unique ID, GPU use, memory
// use and VRAM bytes, Card series/Card Series and Device Name) and the
// "system" object's "(Topology) Weight/Hops/Link type between DRM devices
// i and j" keys. Devices named only in system keys are included; other
// keys ("Driver version", "PID...") are ignored, and leading blank lines
// are accepted.
//
// Malformed input is a *topology.ParseError with Source "rocm-smi --json":
// invalid JSON (topology.ErrSyntax, with line and column), a top level
// that is not a rocm-smi object (ErrWrongTool), a bad number
// (ErrBadNumber) or link type (ErrUnknownLinkType) naming the key.
func ParseJSON(rd io.Reader) (*Report, error) {
	data, err := io.ReadAll(rd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", jsonSource, err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		pe := topology.JSONError(jsonSource, data, err)
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			pe.Line, pe.Column = 0, 0
			pe.Err = fmt.Errorf("%w: top level is a JSON %s, not an object", topology.ErrWrongTool, te.Value)
		}
		return nil, pe
	}
	r := NewReport()
	known := false
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		raw := top[k]
		if k == "system" {
			known = true
			obj, err := stringObject(raw)
			if err != nil {
				return nil, topology.NewParseError(jsonSource, 0, 0, topology.ErrSyntax, "system: %v", err)
			}
			if err := r.systemKeys(obj); err != nil {
				return nil, err
			}
			continue
		}
		m := cardKey.FindStringSubmatch(k)
		if m == nil {
			continue
		}
		known = true
		idx, err := parseIndex(m[1])
		if err != nil {
			return nil, topology.NewParseError(jsonSource, 0, 0, fmt.Errorf("%s: %w", k, err), "")
		}
		obj, err := stringObject(raw)
		if err != nil {
			return nil, topology.NewParseError(jsonSource, 0, 0, topology.ErrSyntax, "%s: %v", k, err)
		}
		d := r.device(idx)
		ck := make([]string, 0, len(obj))
		for key := range obj {
			ck = append(ck, key)
		}
		// "Card series" before "Device Name" so that the series wins.
		sort.Strings(ck)
		for _, key := range ck {
			if err := applyKey(d, key, obj[key]); err != nil {
				return nil, topology.NewParseError(jsonSource, 0, 0, fmt.Errorf("%s %q: %w", k, key, err), "")
			}
		}
	}
	if !known {
		return nil, topology.NewParseError(jsonSource, 0, 0, topology.ErrWrongTool, "no cardN or system object")
	}
	r.addSection("--json")
	return r, nil
}

func (r *Report) systemKeys(obj map[string]string) error {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := strings.TrimSpace(obj[k])
		if k == "Driver version" {
			r.DriverVersion = v
			continue
		}
		m := topoKey.FindStringSubmatch(k)
		if m == nil {
			continue
		}
		a, err := parseIndex(m[2])
		if err == nil {
			var b int
			if b, err = parseIndex(m[3]); err == nil {
				if a == b {
					err = fmt.Errorf("%w: a device paired with itself", topology.ErrSyntax)
				} else {
					err = r.systemValue(m[1], a, b, v)
				}
			}
		}
		if err != nil {
			return topology.NewParseError(jsonSource, 0, 0, fmt.Errorf("system %q: %w", k, err), "")
		}
	}
	return nil
}

func (r *Report) systemValue(what string, a, b int, v string) error {
	if unknownValue(v) || v == "XXXX" {
		r.pair(a, b)
		return nil
	}
	p := r.pair(a, b)
	switch what {
	case "Weight", "Hops":
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return fmt.Errorf("%w: %q", topology.ErrBadNumber, v)
		}
		if what == "Weight" {
			p.Weight = int(n)
		} else {
			p.Hops = int(n)
		}
	case "Link type":
		u := strings.ToUpper(v)
		if u != "XGMI" && u != "PCIE" {
			return fmt.Errorf("%w: %q", topology.ErrUnknownLinkType, v)
		}
		p.Type = u
	}
	return nil
}

// stringObject decodes a JSON object whose values are strings (numbers
// and booleans are kept as their JSON text; nested values are skipped).
func stringObject(raw json.RawMessage) (map[string]string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, errors.New(topology.JSONProblem(err))
	}
	out := make(map[string]string, len(obj))
	for k, v := range obj {
		v = bytes.TrimSpace(v)
		var s string
		switch {
		case len(v) > 0 && v[0] == '"':
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, errors.New(topology.JSONProblem(err))
			}
		case len(v) > 0 && (v[0] == '{' || v[0] == '['):
			continue
		default:
			s = string(v)
		}
		out[k] = s
	}
	return out, nil
}
