// Package amdsmi reads the output of AMD's amd-smi (ROCm 6 and later) into
// a topology.Model: one pure parser per command (ParseDefault's box table
// is the only one with the HIP-ID), Build joins their values, JoinPartitions
// joins physical GPUs with their partitions, and Discover runs the tool.
package amdsmi
