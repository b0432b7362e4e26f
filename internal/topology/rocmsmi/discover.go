package rocmsmi

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// Tool is the program Discover runs.
const Tool = "rocm-smi"

// The argument lists Discover passes to rocm-smi, in the order it runs them.
var (
	TopoArgs = []string{"--showtopo", "--shownodesbw"}
	// TopoFallbackArgs is for rocm-smi before ROCm 5.0 (no --shownodesbw).
	TopoFallbackArgs = []string{"--showtopo"}
	InfoArgs         = []string{"--showuse", "--showmemuse", "--showmeminfo", "vram", "--showbus", "--showuniqueid", "--showproductname"}
	// ConciseArgs prints the concise table, the only place an MI250's second die shows.
	ConciseArgs = []string{}
	VersionArgs = []string{"--version"}
)

// Discover builds the node's model from rocm-smi, run through run with
// TopoArgs (required; TopoFallbackArgs on an old rocm-smi), InfoArgs,
// ConciseArgs and VersionArgs in turn; failures of the last three are
// warnings. Outputs must be whole (else ErrTruncated) and agree (Report.Agree).
func Discover(ctx context.Context, run topology.Runner, warn topology.Warner) (*topology.Model, error) {
	args := TopoArgs
	out, err := run(ctx, Tool, args...)
	if err != nil {
		// Only an old rocm-smi refusing the flag (argparse: exit status 2)
		// is worth a retry; a timeout or a driver error would repeat.
		var te *topology.ToolError
		if !errors.As(err, &te) || te.ExitCode != 2 || errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return nil, err
		}
		warn.Warn("rocm-smi: %v; retrying without --shownodesbw", err)
		args = TopoFallbackArgs
		if out, err = run(ctx, Tool, args...); err != nil {
			return nil, err
		}
	}
	rep, err := ParseText(bytes.NewReader(out))
	if err == nil {
		err = whole(rep, args)
	}
	if err != nil {
		return nil, err
	}
	missing(rep, args, warn)
	for _, more := range [][]string{InfoArgs, ConciseArgs} {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("rocm-smi: %w", err)
		}
		out, err := run(ctx, Tool, more...)
		if err != nil {
			warn.Warn("rocm-smi: %v; continuing without it", err)
			continue
		}
		r, err := ParseText(bytes.NewReader(out))
		if err != nil {
			warn.Warn("%v; ignoring that output", err)
			continue
		}
		if err := cmp.Or(whole(r, more), rep.Agree(r, command(args), command(more))); err != nil {
			return nil, err
		}
		rep.Merge(r)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("rocm-smi: %w", err)
	}
	if out, err := run(ctx, Tool, VersionArgs...); err == nil {
		if v, err := ParseText(bytes.NewReader(out)); err == nil {
			rep.Version = v.Version
		}
	}
	return rep.Model(warn)
}

// showtopoTitles are the sections rocm-smi --showtopo prints.
var showtopoTitles = []string{"weight between two gpus", "hops between two gpus", "link type between two gpus", "numa nodes"}

// missing warns about each --showtopo section an output with one of its
// matrices lacks, which would otherwise leave facts out without a word.
func missing(r *Report, args []string, warn topology.Warner) {
	var lack []string
	matrices := 0
	for i, t := range showtopoTitles {
		if _, ok := r.Listed[t]; !ok {
			lack = append(lack, fmt.Sprintf("%q", t))
		} else if i < 3 {
			matrices++
		}
	}
	if len(lack) > 0 && matrices > 0 {
		warn.Warn("rocm-smi: `%s` printed no %s section; continuing without it", command(args), strings.Join(lack, ", "))
	}
}

// command is the command line of a rocm-smi run, for messages.
func command(args []string) string {
	return strings.Join(append([]string{Tool}, args...), " ")
}

// whole refuses an output cut short (no "End of ROCm SMI Log" banner).
func whole(r *Report, args []string) error {
	if r.Ended {
		return nil
	}
	return topology.NewParseError(command(args), 0, 0, topology.ErrTruncated, "no \"End of ROCm SMI Log\" line, the output was cut short")
}
