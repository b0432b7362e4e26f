// Package amdsmi reads the output of AMD's amd-smi tool (ROCm 6 and later,
// the successor of rocm-smi) into a topology.Model.
//
// The parsers are pure: each takes an io.Reader holding one command's
// output and returns values, never running a program. They accept:
//
//   - `amd-smi topology`: the text tables (ACCESS, WEIGHT, HOPS, LINK TYPE,
//     NUMA BW and, since amd-smi 26, CACHE COHERANCY, ATOMICS, DMA,
//     BI-DIRECTIONAL and a Legend), with or without blank lines between
//     tables (ParseTopology);
//   - `amd-smi topology --json`: the old per-GPU schema with gpu_N maps and
//     the newer schema with a links array, any field subset
//     (ParseTopologyJSON), which Discover reads when the text form fails
//     or prints no table;
//   - `amd-smi list --json` (ParseListJSON);
//   - the default `amd-smi` box table, which alone gives the HIP-ID
//     (ParseDefault);
//   - `amd-smi process --json` and `amd-smi metric --mem-usage --json`
//     (ParseProcessJSON, ParseMemUsageJSON).
//
// Build joins the parsed pieces into a finished model, JoinPartitions
// joins a topology of physical GPUs with a device list of their
// partitions (MI300X in DPX/CPX mode), and Discover runs the tool through
// an injected topology.Runner.
package amdsmi
