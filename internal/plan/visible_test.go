package plan

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/topology"
)

// amdNode is 8 AMD GPUs, runtime index = index, unique ids 0x…a0-0x…a7.
func amdNode() []topology.Device {
	d := make([]topology.Device, 8)
	for i := range d {
		d[i] = topology.Device{Index: i, RuntimeIndex: i, Vendor: topology.VendorAMD,
			UniqueID: "0x5f3c1b2a7d9e40a" + string(rune('0'+i)), NUMANode: i / 4}
	}
	return d
}

// nvidiaNode is 4 NVIDIA GPUs with UUIDs.
func nvidiaNode() []topology.Device {
	uuids := []string{
		"GPU-5a1f3e2c-8b7d-4c6a-9e0f-1a2b3c4d5e6f",
		"GPU-9c8b7a6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d",
		"GPU-c0ffee00-1111-4222-8333-444455556666",
		"GPU-5b000000-aaaa-4bbb-8ccc-dddddddddddd",
	}
	d := make([]topology.Device, len(uuids))
	for i := range d {
		d[i] = topology.Device{Index: i, RuntimeIndex: i, Vendor: topology.VendorNVIDIA, UniqueID: uuids[i]}
	}
	return d
}

func pick(devs []topology.Device, idx ...int) []topology.Device {
	var out []topology.Device
	for _, i := range idx {
		out = append(out, devs[i])
	}
	return out
}

func TestMask(t *testing.T) {
	amd, nv := amdNode(), nvidiaNode()
	tests := []struct {
		name      string
		env       []string
		devs      []topology.Device
		wantCands []int
		chosen    []int // device indices in rank order
		wantEnv   map[string]string
	}{
		{
			name: "nothing set, amd", env: []string{"PATH=/bin"}, devs: amd,
			wantCands: nil, chosen: []int{5, 1},
			wantEnv: map[string]string{"CUDA_VISIBLE_DEVICES": "5,1", "HIP_VISIBLE_DEVICES": "5,1"},
		},
		{
			name: "nothing set, nvidia adds PCI order", devs: nv,
			wantCands: nil, chosen: []int{2, 3},
			wantEnv: map[string]string{"CUDA_VISIBLE_DEVICES": "2,3", "HIP_VISIBLE_DEVICES": "2,3", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
		},
		{
			name: "cuda mask of uuids keeps the user's tokens in rank order", devs: nv,
			env:       []string{"CUDA_VISIBLE_DEVICES=GPU-c0ffee00-1111-4222-8333-444455556666,GPU-5a1f3e2c-8b7d-4c6a-9e0f-1a2b3c4d5e6f"},
			wantCands: []int{0, 2}, chosen: []int{2, 0},
			wantEnv: map[string]string{
				"CUDA_VISIBLE_DEVICES": "GPU-c0ffee00-1111-4222-8333-444455556666,GPU-5a1f3e2c-8b7d-4c6a-9e0f-1a2b3c4d5e6f",
				"HIP_VISIBLE_DEVICES":  "GPU-c0ffee00-1111-4222-8333-444455556666,GPU-5a1f3e2c-8b7d-4c6a-9e0f-1a2b3c4d5e6f",
				"CUDA_DEVICE_ORDER":    "PCI_BUS_ID"},
		},
		{
			name: "uuid prefix and case, as cuda accepts", devs: nv,
			env:       []string{"CUDA_VISIBLE_DEVICES=gpu-9C8B,GPU-5b"},
			wantCands: []int{1, 3}, chosen: []int{3},
			wantEnv: map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-5b", "HIP_VISIBLE_DEVICES": "GPU-5b", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
		},
		{
			name: "cuda mask of physical numbers", devs: nv,
			env:       []string{"CUDA_VISIBLE_DEVICES=3,1"},
			wantCands: []int{1, 3}, chosen: []int{3, 1},
			wantEnv: map[string]string{"CUDA_VISIBLE_DEVICES": "3,1", "HIP_VISIBLE_DEVICES": "3,1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
		},
		{
			name: "nvidia ignores rocr", devs: nv,
			env:       []string{"ROCR_VISIBLE_DEVICES=0"},
			wantCands: nil, chosen: []int{1},
			wantEnv: map[string]string{"CUDA_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
		},
		{
			name: "rocr mask gives hip positions, rocr left alone", devs: amd,
			env:       []string{"ROCR_VISIBLE_DEVICES=2,3,6,7"},
			wantCands: []int{2, 3, 6, 7}, chosen: []int{7, 6},
			wantEnv: map[string]string{"CUDA_VISIBLE_DEVICES": "3,2", "HIP_VISIBLE_DEVICES": "3,2"},
		},
		{
			name: "rocr by unique id", devs: amd,
			env:       []string{"ROCR_VISIBLE_DEVICES=GPU-5f3c1b2a7d9e40a4,GPU-5f3c1b2a7d9e40a1"},
			wantCands: []int{1, 4}, chosen: []int{1},
			wantEnv: map[string]string{"CUDA_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "1"},
		},
		{
			name: "hip under rocr indexes the rocr list", devs: amd,
			env:       []string{"ROCR_VISIBLE_DEVICES=2,3,6,7", "HIP_VISIBLE_DEVICES=1,2"},
			wantCands: []int{3, 6}, chosen: []int{6, 3},
			wantEnv: map[string]string{"CUDA_VISIBLE_DEVICES": "2,1", "HIP_VISIBLE_DEVICES": "2,1"},
		},
		{
			// Slurm gave the job GPUs 2 and 3 (a second job holds 0 and 1)
			// and wrote the same list into every variable.
			name: "slurm's copy of the rocr list names the same devices", devs: amd,
			env: []string{"ROCR_VISIBLE_DEVICES=2,3", "CUDA_VISIBLE_DEVICES=2,3",
				"GPU_DEVICE_ORDINAL=2,3", "ZE_AFFINITY_MASK=2,3"},
			wantCands: []int{2, 3}, chosen: []int{3, 2},
			wantEnv: map[string]string{"CUDA_VISIBLE_DEVICES": "1,0", "HIP_VISIBLE_DEVICES": "1,0"},
		},
		{
			name: "slurm's one-gpu copy", devs: amd,
			env:       []string{"CUDA_VISIBLE_DEVICES=1", "ROCR_VISIBLE_DEVICES=1", "HIP_VISIBLE_DEVICES=1"},
			wantCands: []int{1}, chosen: []int{1},
			wantEnv: map[string]string{"CUDA_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "0"},
		},
		{
			name: "a hip list set on top of slurm's copies narrows it", devs: amd,
			env:       []string{"ROCR_VISIBLE_DEVICES=2,3", "CUDA_VISIBLE_DEVICES=2,3", "HIP_VISIBLE_DEVICES=1"},
			wantCands: []int{3}, chosen: []int{3},
			wantEnv: map[string]string{"CUDA_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "1"},
		},
		{
			name: "hip and cuda agree", devs: amd,
			env:       []string{"HIP_VISIBLE_DEVICES=4,5", "CUDA_VISIBLE_DEVICES=4, 5"},
			wantCands: []int{4, 5}, chosen: []int{5, 4},
			wantEnv: map[string]string{"CUDA_VISIBLE_DEVICES": "5,4", "HIP_VISIBLE_DEVICES": "5,4"},
		},
		{
			name: "last entry wins", devs: amd,
			env:       []string{"HIP_VISIBLE_DEVICES=0", "HIP_VISIBLE_DEVICES=6"},
			wantCands: []int{6}, chosen: []int{6},
			wantEnv: map[string]string{"CUDA_VISIBLE_DEVICES": "6", "HIP_VISIBLE_DEVICES": "6"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseMask(tt.env, tt.devs)
			if err != nil {
				t.Fatalf("ParseMask: %v", err)
			}
			if got := m.Candidates(); !reflect.DeepEqual(got, tt.wantCands) {
				t.Errorf("Candidates = %#v, want %#v", got, tt.wantCands)
			}
			chosen := pick(tt.devs, tt.chosen...)
			if err := m.Check(chosen); err != nil {
				t.Errorf("Check: %v", err)
			}
			got := m.Env(chosen, tt.devs[0].Vendor)
			if !reflect.DeepEqual(got, tt.wantEnv) {
				t.Errorf("Env = %v, want %v", got, tt.wantEnv)
			}
			if _, ok := got[EnvROCRVisible]; ok {
				t.Error("Env sets ROCR_VISIBLE_DEVICES")
			}
		})
	}
}

func TestMaskErrors(t *testing.T) {
	amd, nv := amdNode(), nvidiaNode()
	tests := []struct {
		name string
		env  []string
		devs []topology.Device
		want string
	}{
		{"index beyond the node", []string{"CUDA_VISIBLE_DEVICES=0,9"}, amd, `CUDA_VISIBLE_DEVICES="0,9": entry "9" names no device`},
		{"negative index", []string{"HIP_VISIBLE_DEVICES=-1"}, amd, `HIP_VISIBLE_DEVICES="-1": entry "-1" names no device`},
		{"unknown uuid", []string{"CUDA_VISIBLE_DEVICES=GPU-deadbeef"}, nv, `entry "GPU-deadbeef" names no device`},
		{"ambiguous uuid prefix", []string{"CUDA_VISIBLE_DEVICES=GPU-5"}, nv, `entry "GPU-5" matches 2 devices`},
		{"mig not supported", []string{"CUDA_VISIBLE_DEVICES=MIG-1234"}, nv, `entry "MIG-1234" is neither an index nor a GPU UUID`},
		{"empty entry", []string{"ROCR_VISIBLE_DEVICES=1,,2"}, amd, `entry "" is empty`},
		{"set but empty", []string{"CUDA_VISIBLE_DEVICES="}, amd, "CUDA_VISIBLE_DEVICES is set but empty"},
		{"duplicate", []string{"HIP_VISIBLE_DEVICES=3,3"}, amd, `entry "3" names device 3 twice`},
		{"hip position beyond rocr", []string{"ROCR_VISIBLE_DEVICES=0,1", "HIP_VISIBLE_DEVICES=2"}, amd, "outside the 2 devices ROCR_VISIBLE_DEVICES leaves"},
		{"hip and cuda disagree", []string{"HIP_VISIBLE_DEVICES=1", "CUDA_VISIBLE_DEVICES=2"}, amd, `HIP_VISIBLE_DEVICES="1" and CUDA_VISIBLE_DEVICES="2" name different devices`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseMask(tt.env, tt.devs)
			if err == nil {
				t.Fatalf("ParseMask = %+v, want error", m)
			}
			if !errors.Is(err, ErrMask) {
				t.Errorf("error %v does not wrap ErrMask", err)
			}
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want one line containing %q", err, tt.want)
			}
		})
	}
}

func TestMaskCheck(t *testing.T) {
	amd := amdNode()
	m, err := ParseMask([]string{"ROCR_VISIBLE_DEVICES=4,5"}, amd)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Check(pick(amd, 4, 1)); err == nil || !strings.Contains(err.Error(), "device 1 is not in the visible set 4,5") {
		t.Errorf("Check = %v, want device 1 not visible", err)
	}
	var nilMask *Mask
	if nilMask.Candidates() != nil || nilMask.Check(amd) != nil {
		t.Error("a nil mask narrows something")
	}
	if got := nilMask.Env(pick(amd, 3), topology.VendorAMD)["HIP_VISIBLE_DEVICES"]; got != "3" {
		t.Errorf("nil mask HIP_VISIBLE_DEVICES = %q, want 3", got)
	}
}

func FuzzParseMask(f *testing.F) {
	for _, s := range []string{"0,1", "GPU-5a1f", "", "2,3,6,7", "gpu-9C8B,GPU-5b", "-1", "1,,2", "MIG-x", "0x5f3c1b2a7d9e40a4"} {
		f.Add(s, s, "")
		f.Add("", "1,0", s)
	}
	devs := append(amdNode(), nvidiaNode()...)
	for i := range devs {
		devs[i].Index, devs[i].Vendor = i, topology.VendorAMD
	}
	f.Fuzz(func(t *testing.T, rocr, hip, cuda string) {
		env := []string{"ROCR_VISIBLE_DEVICES=" + rocr, "HIP_VISIBLE_DEVICES=" + hip, "CUDA_VISIBLE_DEVICES=" + cuda}
		m, err := ParseMask(env, devs)
		if err != nil {
			if !errors.Is(err, ErrMask) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("bad error %q", err)
			}
			return
		}
		var chosen []topology.Device
		for _, c := range m.Candidates() {
			if c < 0 || c >= len(devs) {
				t.Fatalf("candidate %d out of range", c)
			}
			chosen = append(chosen, devs[c])
		}
		if err := m.Check(chosen); err != nil {
			t.Fatalf("candidates fail Check: %v", err)
		}
		e := m.Env(chosen, topology.VendorAMD)
		if n := len(strings.Split(e[EnvHIPVisible], ",")); len(chosen) > 0 && n != len(chosen) {
			t.Fatalf("HIP_VISIBLE_DEVICES=%q for %d devices", e[EnvHIPVisible], len(chosen))
		}
	})
}
