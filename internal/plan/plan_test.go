package plan

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/envlist"
	"github.com/amdrun/amdrun/internal/topology"
)

// twoSocketHost is a 2-socket host: node 0 has CPUs 0-15, node 1 16-31.
func twoSocketHost() []topology.NUMANode {
	var n0, n1 []int
	for c := 0; c < 16; c++ {
		n0, n1 = append(n0, c), append(n1, 16+c)
	}
	return []topology.NUMANode{{ID: 0, CPUs: n0}, {ID: 1, CPUs: n1}}
}

func baseSpec() Spec {
	devs := amdNode()
	return Spec{
		Devices:    pick(devs, 4, 5, 0, 1),
		HostNUMA:   twoSocketHost(),
		Argv:       []string{"python", "-u", "train.py", "--lr", "0.1"},
		Env:        []string{"PATH=/usr/bin", "NCCL_NVLS_ENABLE=0", "HIP_VISIBLE_DEVICES=9", "HOME=/root"},
		VisibleEnv: (*Mask)(nil).Env(pick(devs, 4, 5, 0, 1), topology.VendorAMD),
		Bind:       BindNUMA, Mem: MemBind,
		Settings: Settings{NNodes: 2, NodeRank: 1, MasterAddr: "10.0.0.1", MasterPort: 29400,
			RunID: "job7", MaxRestarts: 2},
		TorchVersion: "1.13.1",
	}
}

func TestPlanEnv(t *testing.T) {
	p, err := NewPlan(baseSpec())
	if err != nil {
		t.Fatal(err)
	}
	if p.WorldSize != 8 || len(p.Ranks) != 4 {
		t.Fatalf("WorldSize %d, %d ranks; want 8, 4", p.WorldSize, len(p.Ranks))
	}
	r := p.Ranks[2]
	want := map[string]string{
		"RANK": "6", "LOCAL_RANK": "2", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4",
		"GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", "ROLE_NAME": "default", "ROLE_RANK": "6",
		"ROLE_WORLD_SIZE": "8", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29400",
		"TORCHELASTIC_RUN_ID": "job7", "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "2",
		"TORCHELASTIC_USE_AGENT_STORE": "False", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
		"NCCL_ASYNC_ERROR_HANDLING": "1", // torch < 2.2 reads only this name
		"OMP_NUM_THREADS":           "8", // 16 CPUs of node 0 shared by 2 ranks
		"HIP_VISIBLE_DEVICES":       "4,5,0,1", "CUDA_VISIBLE_DEVICES": "4,5,0,1",
		"PATH": "/usr/bin", "NCCL_NVLS_ENABLE": "0", "HOME": "/root",
	}
	if got := envlist.Map(r.Env); !reflect.DeepEqual(got, want) {
		t.Errorf("rank 6 env:\n got %v\nwant %v", got, want)
	}
	if r.Rank != 6 || r.LocalRank != 2 || r.Device.Index != 0 {
		t.Errorf("rank %d local %d device %d, want 6 2 0", r.Rank, r.LocalRank, r.Device.Index)
	}
	// The base environment keeps its order; the user's HIP_VISIBLE_DEVICES
	// is replaced in place, not duplicated.
	if r.Env[0] != "PATH=/usr/bin" || r.Env[1] != "NCCL_NVLS_ENABLE=0" || r.Env[2] != "HIP_VISIBLE_DEVICES=4,5,0,1" || r.Env[3] != "HOME=/root" {
		t.Errorf("env head %q", r.Env[:4])
	}
	if n := len(r.Env); n != len(want) {
		t.Errorf("%d env entries, want %d (a duplicate?)", n, len(want))
	}
	if !reflect.DeepEqual(r.Argv, []string{"python", "-u", "train.py", "--lr", "0.1"}) {
		t.Errorf("argv %q", r.Argv)
	}
	if len(p.Warnings) != 0 || !strings.Contains(p.OMPNote, "OMP_NUM_THREADS is not set") {
		t.Errorf("warnings %q, OMP note %q, want only the note about OMP_NUM_THREADS", p.Warnings, p.OMPNote)
	}
}

func TestPlanEnvUserSettingsKept(t *testing.T) {
	s := baseSpec()
	s.Env = append(s.Env, "OMP_NUM_THREADS=7", "TORCH_NCCL_ASYNC_ERROR_HANDLING=3")
	s.NNodes, s.NodeRank, s.MasterAddr, s.MasterPort, s.RunID = 0, 0, "", 0, ""
	p, err := NewPlan(s)
	if err != nil {
		t.Fatal(err)
	}
	got := envlist.Map(p.Ranks[3].Env)
	for k, v := range map[string]string{"OMP_NUM_THREADS": "7", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",
		"RANK": "3", "WORLD_SIZE": "4", "GROUP_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"} {
		if got[k] != v {
			t.Errorf("%s=%q, want %q", k, got[k], v)
		}
	}
	// The zero port is a free one, the zero run id a fresh one (never
	// torchrun's 29500 and "none", which job's own zero values do not mean).
	if port, _ := strconv.Atoi(got["MASTER_PORT"]); port < 1 || port == DefaultMasterPort || p.MasterPort != port {
		t.Errorf("MASTER_PORT=%q, plan's %d; want the same free port", got["MASTER_PORT"], p.MasterPort)
	}
	if id := got["TORCHELASTIC_RUN_ID"]; !strings.HasPrefix(id, "amdrun-") || p.RunID != id {
		t.Errorf("TORCHELASTIC_RUN_ID=%q, plan's %q; want the same fresh id", id, p.RunID)
	}
	if len(p.Warnings) != 0 || p.OMPNote != "" {
		t.Errorf("warnings %q, OMP note %q, want none", p.Warnings, p.OMPNote)
	}
}

func TestPlanBinding(t *testing.T) {
	devs := amdNode() // 0-3 on NUMA node 0, 4-7 on node 1
	homeless := devs[2]
	homeless.NUMANode = -1
	foreign := devs[3]
	foreign.NUMANode = 5
	type want struct {
		node int
		cpus string
		mems []int
		omp  string
	}
	tests := []struct {
		name     string
		devs     []topology.Device
		host     []topology.NUMANode
		allowed  []int
		bind     BindMode
		mem      MemPolicy
		want     []want
		warnings []string
	}{
		{
			name: "numa", devs: pick(devs, 0, 4, 1), host: twoSocketHost(), bind: BindNUMA, mem: MemBind,
			want: []want{{0, "0-15", []int{0}, "8"}, {1, "16-31", []int{1}, "16"}, {0, "0-15", []int{0}, "8"}},
		},
		{
			name: "numa preferred, restricted by allowed cpus", devs: pick(devs, 0, 4), host: twoSocketHost(),
			allowed: []int{2, 3, 4, 20, 21}, bind: BindNUMA, mem: MemPreferred,
			want: []want{{0, "2-4", []int{0}, "3"}, {1, "20-21", []int{1}, "2"}},
		},
		{
			name: "exclusive splits a node in contiguous chunks", devs: pick(devs, 0, 1, 2, 3, 4), host: twoSocketHost(), bind: BindExclusive, mem: MemBind,
			want: []want{{0, "0-3", []int{0}, "4"}, {0, "4-7", []int{0}, "4"}, {0, "8-11", []int{0}, "4"}, {0, "12-15", []int{0}, "4"}, {1, "16-31", []int{1}, "16"}},
		},
		{
			name: "exclusive uneven split of allowed cpus", devs: pick(devs, 0, 1, 2, 3), host: twoSocketHost(),
			allowed: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, bind: BindExclusive, mem: MemNone,
			want: []want{{0, "0-2", nil, "3"}, {0, "3-5", nil, "3"}, {0, "6-7", nil, "2"}, {0, "8-9", nil, "2"}},
		},
		{
			name: "exclusive with more ranks than cpus shares", devs: pick(devs, 0, 1, 2), host: []topology.NUMANode{{ID: 0, CPUs: []int{0, 1}}},
			bind: BindExclusive, mem: MemBind,
			want:     []want{{0, "0", []int{0}, "1"}, {0, "1", []int{0}, "1"}, {0, "0", []int{0}, "1"}},
			warnings: []string{"bind exclusive: more ranks than CPUs on NUMA node 0 (3 ranks, 2 CPUs): some ranks share a CPU"},
		},
		{
			name: "none", devs: pick(devs, 0, 4), host: twoSocketHost(), bind: BindNone, mem: MemBind,
			want: []want{{-1, "", nil, "16"}, {-1, "", nil, "16"}},
		},
		{
			name: "devices without a host numa node warn once", devs: []topology.Device{devs[0], homeless, foreign}, host: twoSocketHost(), bind: BindNUMA, mem: MemBind,
			want:     []want{{0, "0-15", []int{0}, "16"}, {-1, "", nil, "10"}, {-1, "", nil, "10"}},
			warnings: []string{"bind: the host has no NUMA node for local rank(s) 1 (device 2, NUMA node -1), 2 (device 3, NUMA node 5): they are not bound"},
		},
		{
			name: "no host numa information", devs: pick(devs, 0, 1), bind: BindExclusive, mem: MemBind,
			want:     []want{{-1, "", nil, "1"}, {-1, "", nil, "1"}},
			warnings: []string{"bind exclusive: the host's NUMA nodes are unknown: ranks are not bound"},
		},
		{
			name: "node with no allowed cpu", devs: pick(devs, 0, 4), host: twoSocketHost(), allowed: []int{17}, bind: BindNUMA, mem: MemBind,
			want:     []want{{-1, "", nil, "1"}, {1, "17", []int{1}, "1"}},
			warnings: []string{"bind: amdrun may use none of the CPUs of the NUMA node of local rank(s) 0 (NUMA node 0): they are not bound"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPlan(Spec{Devices: tt.devs, HostNUMA: tt.host, AllowedCPUs: tt.allowed,
				Argv: []string{"w"}, Bind: tt.bind, Mem: tt.mem})
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range tt.want {
				r := p.Ranks[i]
				if r.NUMANode != w.node || topology.FormatCPUList(r.CPUs) != w.cpus || !reflect.DeepEqual(r.Mems, w.mems) {
					t.Errorf("rank %d: node %d cpus %q mems %v, want %d %q %v", i, r.NUMANode, topology.FormatCPUList(r.CPUs), r.Mems, w.node, w.cpus, w.mems)
				}
				if got := envlist.Map(r.Env)["OMP_NUM_THREADS"]; got != w.omp {
					t.Errorf("rank %d: OMP_NUM_THREADS=%s, want %s", i, got, w.omp)
				}
				if r.Bound() != (w.cpus != "") {
					t.Errorf("rank %d: Bound() = %v", i, r.Bound())
				}
				wantPol := MemNone
				if w.mems != nil {
					wantPol = tt.mem
				}
				if r.MemPolicy != wantPol {
					t.Errorf("rank %d: mem policy %q, want %q", i, r.MemPolicy, wantPol)
				}
			}
			// Drop the OMP note, which every case without OMP_NUM_THREADS has.
			var warns []string
			for _, w := range p.Warnings {
				if !strings.HasPrefix(w, "OMP_NUM_THREADS") {
					warns = append(warns, w)
				}
			}
			if !reflect.DeepEqual(warns, tt.warnings) {
				t.Errorf("warnings:\n got %q\nwant %q", warns, tt.warnings)
			}
		})
	}
}

func TestPlanErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Spec)
		want string
	}{
		{"no devices", func(s *Spec) { s.Devices = nil }, "launch: invalid launch spec: no devices"},
		{"devices and cpu ranks", func(s *Spec) { s.CPURanks = 2 }, "4 devices and 2 CPU ranks"},
		{"devices per rank", func(s *Spec) { s.DevicesPerRank = 3 }, "4 devices do not split into ranks of 3"},
		{"visible per rank", func(s *Spec) { s.RankVisibleEnv = []map[string]string{{}} }, "visible devices for 1 ranks, the plan has 4"},
		{"no command", func(s *Spec) { s.Argv = nil }, "no worker command"},
		{"device twice", func(s *Spec) { s.Devices = append(s.Devices, s.Devices[0]) }, "device 4 chosen twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := baseSpec()
			tt.edit(&s)
			_, err := NewPlan(s)
			if err == nil || !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewPlan error %v, want ErrSpec containing %q", err, tt.want)
			}
		})
	}
}

func TestParseModes(t *testing.T) {
	for in, want := range map[string]BindMode{"numa": BindNUMA, "Exclusive": BindExclusive, " none ": BindNone, "socket": BindSocket, "Core-Complex": BindCoreComplex} {
		if got, err := ParseBindMode(in); err != nil || got != want {
			t.Errorf("ParseBindMode(%q) = %q, %v", in, got, err)
		}
	}
	for in, want := range map[string]MemPolicy{"bind": MemBind, "PREFERRED": MemPreferred, "none": MemNone} {
		if got, err := ParseMemPolicy(in); err != nil || got != want {
			t.Errorf("ParseMemPolicy(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseBindMode("cores"); err == nil || err.Error() != `bind: unknown mode "cores" (valid: numa, exclusive, socket, core-complex, none)` {
		t.Errorf("ParseBindMode(cores) error %v", err)
	}
	if _, err := ParseMemPolicy(""); err == nil || err.Error() != `mem policy: unknown policy "" (valid: bind, preferred, none)` {
		t.Errorf("ParseMemPolicy(\"\") error %v", err)
	}
}

// TestPlanAsyncErrorHandling: both names torch has read are set, unless
// the user set either (then amdrun sets neither, so that the user's
// value is the only one torch sees).
func TestPlanAsyncErrorHandling(t *testing.T) {
	for _, tc := range []struct {
		version    string
		env        []string
		torch, old string // "" = unset
	}{
		{"", nil, "1", ""},             // unknown torch: current torch warns on the old name
		{"2.11.0+cu130", nil, "1", ""}, // reads the new name only
		{"2.1.2", nil, "1", "1"},       // reads the old name only
		{"1.13.1", nil, "1", "1"},      // Debian's
		{"1.13.1", []string{"TORCH_NCCL_ASYNC_ERROR_HANDLING=3"}, "3", ""},
		{"", []string{"NCCL_ASYNC_ERROR_HANDLING=0"}, "", "0"},
	} {
		s := baseSpec()
		s.Env, s.TorchVersion = tc.env, tc.version
		p, err := NewPlan(s)
		if err != nil {
			t.Fatal(err)
		}
		env := envlist.Map(p.Ranks[0].Env)
		if env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] != tc.torch || env["NCCL_ASYNC_ERROR_HANDLING"] != tc.old {
			t.Errorf("torch %q, user env %q: TORCH_NCCL_ASYNC_ERROR_HANDLING=%q NCCL_ASYNC_ERROR_HANDLING=%q, want %q and %q",
				tc.version, tc.env, env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], env["NCCL_ASYNC_ERROR_HANDLING"], tc.torch, tc.old)
		}
	}
}

// TestPlanDevicesPerRank: 4 devices for 2 ranks give each rank 2 of them,
// in order, with its own visible list and a binding to its devices' NUMA
// nodes (both nodes for a rank whose devices straddle them).
func TestPlanDevicesPerRank(t *testing.T) {
	devs := amdNode() // 0-3 on NUMA node 0, 4-7 on node 1
	chosen := pick(devs, 0, 1, 3, 4)
	s := Spec{
		Devices: chosen, DevicesPerRank: 2, HostNUMA: twoSocketHost(),
		Argv: []string{"w"}, Bind: BindNUMA, Mem: MemBind, Settings: Settings{Role: "trainer"},
		RankVisibleEnv: []map[string]string{
			(*Mask)(nil).Env(chosen[:2], topology.VendorAMD), (*Mask)(nil).Env(chosen[2:], topology.VendorAMD),
		},
	}
	p, err := NewPlan(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Ranks) != 2 || p.WorldSize != 2 {
		t.Fatalf("%d ranks, world %d; want 2, 2", len(p.Ranks), p.WorldSize)
	}
	for i, want := range []struct {
		label, visible, cpus string
		nodes                []int
		local                string
	}{
		{"0,1", "0,1", "0-15", []int{0}, "0"},
		{"3,4", "3,4", "0-31", []int{0, 1}, "1"},
	} {
		r := p.Ranks[i]
		env := envlist.Map(r.Env)
		if r.DeviceLabel() != want.label || env["HIP_VISIBLE_DEVICES"] != want.visible || env["CUDA_VISIBLE_DEVICES"] != want.visible {
			t.Errorf("rank %d: devices %s, visible %q/%q; want %s and %q", i, r.DeviceLabel(), env["HIP_VISIBLE_DEVICES"], env["CUDA_VISIBLE_DEVICES"], want.label, want.visible)
		}
		if topology.FormatCPUList(r.CPUs) != want.cpus || !reflect.DeepEqual(r.NUMANodes, want.nodes) || !reflect.DeepEqual(r.Mems, want.nodes) {
			t.Errorf("rank %d: cpus %s nodes %v mems %v; want %s, %v", i, topology.FormatCPUList(r.CPUs), r.NUMANodes, r.Mems, want.cpus, want.nodes)
		}
		if env["LOCAL_RANK"] != want.local || env["LOCAL_WORLD_SIZE"] != "2" || env["ROLE_NAME"] != "trainer" {
			t.Errorf("rank %d: LOCAL_RANK %s LOCAL_WORLD_SIZE %s ROLE_NAME %s", i, env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"], env["ROLE_NAME"])
		}
	}
	// One process with all four devices (an inference server's shape).
	s.DevicesPerRank, s.RankVisibleEnv = 4, nil
	s.VisibleEnv = (*Mask)(nil).Env(chosen, topology.VendorAMD)
	p, err = NewPlan(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Ranks) != 1 || p.Ranks[0].DeviceLabel() != "0,1,3,4" || envlist.Map(p.Ranks[0].Env)["HIP_VISIBLE_DEVICES"] != "0,1,3,4" {
		t.Errorf("one rank with 4 devices: %d ranks, devices %s", len(p.Ranks), p.Ranks[0].DeviceLabel())
	}
}

// TestPlanVirtualLocalRank: LOCAL_RANK is 0 everywhere, each rank seeing
// only its own device.
func TestPlanVirtualLocalRank(t *testing.T) {
	devs := pick(amdNode(), 2, 5)
	p, err := NewPlan(Spec{
		Devices: devs, Argv: []string{"w"}, Settings: Settings{VirtualLocalRank: true},
		RankVisibleEnv: []map[string]string{
			(*Mask)(nil).Env(devs[:1], topology.VendorAMD), (*Mask)(nil).Env(devs[1:], topology.VendorAMD),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, vis := range []string{"2", "5"} {
		env := envlist.Map(p.Ranks[i].Env)
		if env["LOCAL_RANK"] != "0" || env["RANK"] != fmt.Sprint(i) || env["CUDA_VISIBLE_DEVICES"] != vis {
			t.Errorf("rank %d: LOCAL_RANK %s RANK %s CUDA_VISIBLE_DEVICES %s; want 0, %d, %s", i, env["LOCAL_RANK"], env["RANK"], env["CUDA_VISIBLE_DEVICES"], i, vis)
		}
	}
}

// TestPlanCPURanks: ranks without devices get the torchrun environment, no
// visible-device variable of amdrun's, and are spread over the NUMA nodes
// in contiguous blocks.
func TestPlanCPURanks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int
		bind  BindMode
		host  []topology.NUMANode
		nodes []int // per rank, -1 = not bound
		cpus  []string
		omp   []string
	}{
		{"numa, 4 ranks on 2 nodes", 4, BindNUMA, twoSocketHost(), []int{0, 0, 1, 1},
			[]string{"0-15", "0-15", "16-31", "16-31"}, []string{"8", "8", "8", "8"}},
		{"numa, 3 ranks on 2 nodes", 3, BindNUMA, twoSocketHost(), []int{0, 0, 1},
			[]string{"0-15", "0-15", "16-31"}, []string{"8", "8", "16"}},
		{"exclusive", 4, BindExclusive, twoSocketHost(), []int{0, 0, 1, 1},
			[]string{"0-7", "8-15", "16-23", "24-31"}, []string{"8", "8", "8", "8"}},
		{"none", 2, BindNone, twoSocketHost(), []int{-1, -1}, []string{"", ""}, []string{"16", "16"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPlan(Spec{CPURanks: tc.n, HostNUMA: tc.host, Argv: []string{"w"}, Bind: tc.bind, Mem: MemBind,
				Env: []string{"CUDA_VISIBLE_DEVICES=7"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Ranks) != tc.n || p.WorldSize != tc.n {
				t.Fatalf("%d ranks, world %d; want %d", len(p.Ranks), p.WorldSize, tc.n)
			}
			for i, r := range p.Ranks {
				env := envlist.Map(r.Env)
				if r.DeviceLabel() != "cpu" || r.Device.Index != -1 || len(r.Devices) != 0 {
					t.Errorf("rank %d: devices %s (index %d)", i, r.DeviceLabel(), r.Device.Index)
				}
				if env["RANK"] != fmt.Sprint(i) || env["LOCAL_RANK"] != fmt.Sprint(i) || env["WORLD_SIZE"] != fmt.Sprint(tc.n) {
					t.Errorf("rank %d: RANK %s LOCAL_RANK %s WORLD_SIZE %s", i, env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"])
				}
				if env["CUDA_VISIBLE_DEVICES"] != "7" {
					t.Errorf("rank %d: CUDA_VISIBLE_DEVICES %q, want the user's 7 untouched", i, env["CUDA_VISIBLE_DEVICES"])
				}
				if _, ok := env["HIP_VISIBLE_DEVICES"]; ok {
					t.Errorf("rank %d: HIP_VISIBLE_DEVICES set for a CPU rank", i)
				}
				if r.NUMANode != tc.nodes[i] || topology.FormatCPUList(r.CPUs) != tc.cpus[i] || env["OMP_NUM_THREADS"] != tc.omp[i] {
					t.Errorf("rank %d: node %d cpus %q omp %s; want %d %q %s", i, r.NUMANode, topology.FormatCPUList(r.CPUs), env["OMP_NUM_THREADS"], tc.nodes[i], tc.cpus[i], tc.omp[i])
				}
			}
		})
	}
}

func TestParseTorchVersion(t *testing.T) {
	for out, want := range map[string]string{
		"2.11.0+cu130\n": "2.11.0+cu130", "1.13.1": "1.13.1", "2.2.0a0+git": "2.2.0a0+git",
		"": "", "Traceback": "", "2": "", "x.y": "",
	} {
		if got := ParseTorchVersion([]byte(out)); got != want {
			t.Errorf("%q: %q, want %q", out, got, want)
		}
	}
}

// TestPlanOMPNoteOnlyForSeveralRanks: amdrun sets OMP_NUM_THREADS for
// one rank too, but says so only for more than one rank on the node, as
// torchrun does (issue 31).
func TestPlanOMPNoteOnlyForSeveralRanks(t *testing.T) {
	s := baseSpec()
	s.Devices = s.Devices[:1]
	p, err := NewPlan(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := envlist.Map(p.Ranks[0].Env)["OMP_NUM_THREADS"]; got == "" {
		t.Errorf("one rank: OMP_NUM_THREADS not set")
	}
	if p.OMPNote != "" || len(p.Warnings) != 0 {
		t.Errorf("one rank: OMP note %q, warnings %q; want none", p.OMPNote, p.Warnings)
	}
}

// TestPlanFlightRecorder: the flight recorder's buffer and dump on
// timeout are set under the name the torch version reads, none for a
// torch without the recorder (Debian's 1.13) or an unknown one, and
// neither overrides what the user set.
func TestPlanFlightRecorder(t *testing.T) {
	for _, tc := range []struct {
		version string
		env     []string
		want    map[string]string // the FR variables in the rank's env
		file    string            // FRDumpFileVar
	}{
		{"1.13.1", nil, map[string]string{}, ""},
		{"", nil, map[string]string{}, ""},
		{"2.1.2", nil, map[string]string{}, ""},
		{"2.4.1", nil, map[string]string{"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1"}, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"},
		{"2.11.0+cu130", nil, map[string]string{"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1"}, "TORCH_FR_DUMP_TEMP_FILE"},
		{"2.11.0", []string{"TORCH_NCCL_TRACE_BUFFER_SIZE=0", "TORCH_NCCL_DUMP_ON_TIMEOUT=0"},
			map[string]string{"TORCH_NCCL_TRACE_BUFFER_SIZE": "0", "TORCH_NCCL_DUMP_ON_TIMEOUT": "0"}, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"},
		{"2.11.0", []string{"TORCH_FR_DUMP_TEMP_FILE=/x/fr_"},
			map[string]string{"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1"}, ""},
	} {
		s := baseSpec()
		s.Env, s.TorchVersion = tc.env, tc.version
		p, err := NewPlan(s)
		if err != nil {
			t.Fatal(err)
		}
		env := envlist.Map(p.Ranks[0].Env)
		got := map[string]string{}
		for _, k := range []string{"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_DUMP_ON_TIMEOUT"} {
			if v, ok := env[k]; ok {
				got[k] = v
			}
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("torch %q, user env %q: %v, want %v", tc.version, tc.env, got, tc.want)
		}
		if f := FRDumpFileVar(p.Ranks[0].Env); f != tc.file {
			t.Errorf("torch %q, user env %q: dump file variable %q, want %q", tc.version, tc.env, f, tc.file)
		}
	}
}
