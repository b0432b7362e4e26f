// Package amdsmi reads the output of AMD's amd-smi tool (ROCm 6 and later,
// the successor of rocm-smi) into a topology.Model.
//
// One pure parser per command (ParseTopology, ParseTopologyJSON,
// ParseListJSON, ParseDefault: the box table, the only one with the
// HIP-ID; ParseProcessJSON, ParseMemUsageJSON). Build joins their values
// into a finished model, JoinPartitions joins a topology of physical GPUs
// with a list of their partitions (MI300X in DPX/CPX mode), and Discover
// runs the tool through an injected topology.Runner.
package amdsmi
