package launch

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/amdrun/amdrun/internal/topology"
)

// Job is a chosen set of devices and what to run on it: the input of
// PlanJob. Zero values are documented per field.
type Job struct {
	// TorchVersion is the workers' torch version, "" when unknown (see
	// Spec.TorchVersion and TorchVersionProbe).
	TorchVersion string
	// Model is the node the devices were chosen on; nil only for CPU
	// ranks.
	Model *topology.Model
	// Chosen are indices into Model.Devices, in rank order (each rank
	// takes DevicesPerRank consecutive ones). Empty only for CPU ranks.
	Chosen []int
	// DevicesPerRank is how many of Chosen each rank gets; 0 means 1.
	// Ranks with more than one device, and ranks under
	// VirtualLocalRank, see only their own devices.
	DevicesPerRank int
	// CPURanks is the number of ranks of a job without devices (the node
	// has no GPU, or --ngpus 0); 0 unless Chosen is empty.
	CPURanks int
	// Mask is the visible-device mask amdrun itself runs under
	// (ParseMask of Env); nil means none.
	Mask *Mask
	// Argv is the worker command; nil means "-" (a dry run without a
	// script shows the plan anyway).
	Argv []string
	// Env is amdrun's environment, passed through to every rank.
	Env []string
	// HostNUMA are this host's NUMA nodes; nil means unknown (no binding).
	HostNUMA []topology.NUMANode
	// Bind is the binding; "" means BindNUMA on a host with more than one
	// NUMA node, else BindNone.
	Bind BindMode
	// Mem is the memory policy of bound ranks ("" means MemNone).
	Mem MemPolicy
	// NNodes, NodeRank, MasterAddr and MasterPort place this node in the
	// job; MasterPort 0 means a free port on this host, chosen now.
	NNodes, NodeRank int
	MasterAddr       string
	MasterPort       int
	// MaxRestarts is how often a failed group is restarted.
	MaxRestarts int
	// RunID is TORCHELASTIC_RUN_ID (torchrun's --rdzv-id); "" means a
	// fresh NewRunID.
	RunID string
	// Role is ROLE_NAME (torchrun's --role); "" means DefaultRole.
	Role string
	// VirtualLocalRank gives every rank LOCAL_RANK=0 and only its own
	// devices, as torchrun's --virtual-local-rank.
	VirtualLocalRank bool
}

// PlanJob turns a choice into a plan: the thin, impure wrapper of
// NewPlan. It checks the choice against the mask, picks a free port when
// none is given, reads the CPUs this process may use and makes a run id;
// everything else is NewPlan's.
func PlanJob(j Job) (*Plan, error) {
	chosen := make([]topology.Device, len(j.Chosen))
	for i, d := range j.Chosen {
		chosen[i] = j.Model.Devices[d]
	}
	if err := j.Mask.Check(chosen); err != nil { // a nil Mask narrows nothing
		return nil, err
	}
	port := j.MasterPort
	if port == 0 {
		p, err := FreePort()
		if err != nil {
			return nil, fmt.Errorf("cannot find a free port for MASTER_PORT (give --master-port): %w", err)
		}
		port = p
	}
	bind := j.Bind
	if bind == "" {
		bind = BindNone
		if len(j.HostNUMA) > 1 {
			bind = BindNUMA
		}
	}
	argv := j.Argv
	if len(argv) == 0 {
		argv = []string{"-"}
	}
	runID := j.RunID
	if runID == "" {
		runID = NewRunID()
	}
	s := Spec{
		Devices:          chosen,
		DevicesPerRank:   j.DevicesPerRank,
		CPURanks:         j.CPURanks,
		HostNUMA:         j.HostNUMA,
		AllowedCPUs:      ownCPUs(),
		Argv:             argv,
		Env:              j.Env,
		Bind:             bind,
		Mem:              j.Mem,
		NNodes:           j.NNodes,
		NodeRank:         j.NodeRank,
		MasterAddr:       j.MasterAddr,
		MasterPort:       port,
		RunID:            runID,
		Role:             j.Role,
		VirtualLocalRank: j.VirtualLocalRank,
		MaxRestarts:      j.MaxRestarts,
		TorchVersion:     j.TorchVersion,
	}
	if len(chosen) > 0 {
		vendor := j.Model.Vendor
		per := max(1, j.DevicesPerRank)
		if per > 1 || j.VirtualLocalRank {
			// Each rank sees its own devices only (a rank with several
			// devices has no LOCAL_RANK-th one to pick among all).
			for k := 0; k+per <= len(chosen); k += per {
				s.RankVisibleEnv = append(s.RankVisibleEnv, j.Mask.Env(chosen[k:k+per], vendor))
			}
		} else {
			s.VisibleEnv = j.Mask.Env(chosen, vendor)
		}
	}
	return NewPlan(s)
}

// NewRunID returns a fresh TORCHELASTIC_RUN_ID, "amdrun-" and 12 hex digits.
func NewRunID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "amdrun-" + hex.EncodeToString(b[:])
}
