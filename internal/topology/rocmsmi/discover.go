package rocmsmi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// Tool is the program Discover runs.
const Tool = "rocm-smi"

// The argument lists Discover passes to rocm-smi, in the order it runs
// them. Fake rocm-smi scripts in tests replay fixtures keyed by these.
var (
	// TopoArgs prints the Weight, Hops, Link Type and Numa Nodes sections
	// and the Bandwidth (--shownodesbw) matrix.
	TopoArgs = []string{"--showtopo", "--shownodesbw"}
	// TopoFallbackArgs is tried when TopoArgs fails: rocm-smi before ROCm
	// 5.0 has no --shownodesbw and exits 2 on it.
	TopoFallbackArgs = []string{"--showtopo"}
	// InfoArgs prints identity and load: GPU use, memory use, VRAM bytes,
	// PCI bus, unique id and product name.
	InfoArgs = []string{"--showuse", "--showmemuse", "--showmeminfo", "vram", "--showbus", "--showuniqueid", "--showproductname"}
	// ConciseArgs (no arguments) prints the concise table, the only place
	// where the second die of an MI250 package shows (AvgPwr N/A,
	// PwrCap 0.0W). rocm-smi prints it only when given no display flag.
	ConciseArgs = []string{}
	// VersionArgs prints "ROCM-SMI version: ..." lines.
	VersionArgs = []string{"--version"}
)

// Discover builds the node's model from rocm-smi, run through run (never
// directly). It runs, in order:
//
//	rocm-smi --showtopo --shownodesbw       (required; on failure it retries
//	                                         rocm-smi --showtopo and warns)
//	rocm-smi --showuse --showmemuse --showmeminfo vram --showbus --showuniqueid --showproductname
//	rocm-smi                                (concise table)
//	rocm-smi --version
//
// The topology run is required: its error is returned as run gave it
// (errors.Is(err, topology.ErrToolNotFound), *topology.ToolError), or a
// *topology.ParseError when its output is malformed. Failures of the
// other runs are warnings, and the model is built without what they
// would have added. ctx cancellation stops between runs.
//
// Outputs must be whole and agree: one without its "End of ROCm SMI
// Log" banner (cut short) is refused with topology.ErrTruncated, and two
// runs that list different GPUs, or give one GPU different PCI buses or
// NUMA nodes, with topology.ErrInconsistent naming both runs.
func Discover(ctx context.Context, run topology.Runner, warn topology.Warner) (*topology.Model, error) {
	if run == nil {
		return nil, errors.New("rocm-smi: no runner")
	}
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
		out, err = run(ctx, Tool, args...)
		if err != nil {
			return nil, err
		}
	}
	rep, err := parseWhole(out, args)
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
		if err := whole(r, more); err != nil {
			return nil, err
		}
		if err := rep.Agree(r, command(args), command(more)); err != nil {
			return nil, err
		}
		rep.Merge(r)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("rocm-smi: %w", err)
	}
	if v, err := Version(ctx, run); err == nil {
		rep.Version = v
	}
	return rep.Model(warn)
}

// showtopoTitles are the sections rocm-smi --showtopo prints.
var showtopoTitles = []string{"weight between two gpus", "hops between two gpus", "link type between two gpus", "numa nodes"}

// missing warns about each --showtopo section the output of the run with
// args lacks when it has one of the three matrices only --showtopo
// prints (Numa Nodes is --showtoponuma's too): a title damaged past
// recognition, or a section cut out, would otherwise leave its facts out
// without a word.
func missing(r *Report, args []string, warn topology.Warner) {
	if !slices.Contains(args, "--showtopo") {
		return
	}
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

// parseWhole parses the output of the run with args and checks it is whole.
func parseWhole(out []byte, args []string) (*Report, error) {
	r, err := ParseText(bytes.NewReader(out))
	if err != nil {
		return nil, err
	}
	return r, whole(r, args)
}

// whole refuses an output without its "End of ROCm SMI Log" banner: cut
// short, it can describe fewer GPUs than the node has without a sign.
func whole(r *Report, args []string) error {
	if r.Ended {
		return nil
	}
	return topology.NewParseError(command(args), 0, 0, topology.ErrTruncated, "no \"End of ROCm SMI Log\" line, the output was cut short")
}

// Version runs rocm-smi --version through run and returns rocm-smi's own
// version ("3.0.0+03a4530"). It fails with run's error, or with a
// *topology.ParseError when the output has no version line.
func Version(ctx context.Context, run topology.Runner) (string, error) {
	out, err := run(ctx, Tool, VersionArgs...)
	if err != nil {
		return "", err
	}
	rep, err := ParseText(bytes.NewReader(out))
	if err != nil {
		return "", err
	}
	if rep.Version == "" {
		return "", topology.NewParseError("rocm-smi --version", 0, 0, topology.ErrSyntax, "no ROCM-SMI version line")
	}
	return rep.Version, nil
}
