package amdsmi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// decodeJSON reads one JSON document, skipping the warning lines amd-smi
// can print before it. Syntax errors carry the line and column.
func decodeJSON(src string, r io.Reader) (any, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	body, skipped := data, 0
	for len(body) > 0 {
		line, rest, _ := bytes.Cut(body, []byte("\n"))
		if t := bytes.TrimSpace(line); len(t) > 0 && (t[0] == '[' || t[0] == '{') {
			break
		}
		body, skipped = rest, skipped+1
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if len(bytes.TrimSpace(data)) == 0 {
			return nil, topology.NewParseError(src, 0, 0, topology.ErrEmpty, "")
		}
		return nil, topology.NewParseError(src, 0, 0, topology.ErrWrongTool, "no JSON document")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		pe := topology.JSONError(src, body, err)
		if err == io.ErrUnexpectedEOF {
			pe.Line, pe.Column = topology.LineCol(body, int64(len(body)))
			pe.Err = fmt.Errorf("%w: JSON document ends early", topology.ErrTruncated)
		}
		if pe.Line > 0 {
			pe.Line += skipped
		}
		return nil, pe
	}
	if dec.More() {
		l, c := topology.LineCol(body, dec.InputOffset())
		return nil, topology.NewParseError(src, l+skipped, c, topology.ErrSyntax, "text after the JSON document")
	}
	return v, nil
}

// jsonInt reads an integer printed as a number, a numeric string or
// {"value": n}; ok is false for absent, null or "N/A".
func jsonInt(v any) (n int64, ok bool, err error) {
	switch x := v.(type) {
	case nil:
		return 0, false, nil
	case json.Number:
		if i, e := x.Int64(); e == nil {
			return i, true, nil
		}
		f, e := x.Float64()
		if e != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return 0, false, fmt.Errorf("%w: %s", topology.ErrBadNumber, x)
		}
		return int64(f), true, nil
	case string:
		s := strings.TrimSpace(x)
		if s == "" || strings.EqualFold(s, "N/A") {
			return 0, false, nil
		}
		i, e := strconv.ParseInt(s, 0, 64)
		if e != nil {
			return 0, false, fmt.Errorf("%w: %q", topology.ErrBadNumber, x)
		}
		return i, true, nil
	case map[string]any:
		if val, has := x["value"]; has {
			return jsonInt(val)
		}
	}
	return 0, false, fmt.Errorf("%w: %v", topology.ErrBadNumber, v)
}

// jsonString reads a string or number; N/A and null give "".
func jsonString(v any) string {
	switch x := v.(type) {
	case string:
		if s := strings.TrimSpace(x); !strings.EqualFold(s, "N/A") {
			return s
		}
	case json.Number:
		return x.String()
	}
	return ""
}

// decodeGPUs decodes a JSON array of per-GPU objects and each one's "gpu".
func decodeGPUs(src string, r io.Reader) ([]map[string]any, []int, error) {
	v, err := decodeJSON(src, r)
	if err != nil {
		return nil, nil, err
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, nil, topology.NewParseError(src, 0, 0, topology.ErrWrongTool, "top level is not a list")
	}
	if len(arr) > MaxGPUs {
		return nil, nil, topology.NewParseError(src, 0, 0, topology.ErrSyntax, "more than %d GPUs", MaxGPUs)
	}
	objs, gpus := make([]map[string]any, len(arr)), make([]int, len(arr))
	for i, e := range arr {
		if objs[i], ok = e.(map[string]any); !ok {
			return nil, nil, topology.NewParseError(src, 0, 0, topology.ErrSyntax, "element %d is not an object", i)
		}
		v, has := objs[i]["gpu"]
		if !has {
			return nil, nil, topology.NewParseError(src, 0, 0, topology.ErrSyntax, "element %d has no \"gpu\"", i)
		}
		n, ok, err := jsonInt(v)
		if err != nil || !ok || n < 0 || n >= 1<<20 {
			return nil, nil, topology.NewParseError(src, 0, 0, topology.ErrBadNumber, "element %d: gpu %v", i, v)
		}
		gpus[i] = int(n)
	}
	return objs, gpus, nil
}
