package bench

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/envlist"
	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/topology"
)

func TestSteps(t *testing.T) {
	m := model4(t)
	m.Devices[2].RuntimeIndex, m.Devices[3].RuntimeIndex = 3, 2 // runtime order differs from the tool's
	host := []topology.NUMANode{{ID: 0, CPUs: []int{0, 1}}, {ID: 1}, {ID: 2, CPUs: []int{4}}}
	steps, devs, err := Steps(m, StepsSpec{
		Devices: []int{3, 1}, Python: "/py", SizeMiB: 64, Iters: 3, Env: []string{"A=1"},
		HostNUMA: func() ([]topology.NUMANode, error) { return host, nil },
		Self:     func() (string, error) { return "/amdrun", nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(devs, []int{3, 1}) || len(steps) != 3 {
		t.Fatalf("devices %v, %d steps: want [3 1], d2d + one h2d per node with CPUs", devs, len(steps))
	}
	d2d := steps[0]
	if d2d.Mode != "d2d" || d2d.NUMA != -1 || d2d.Argv[0] != "/py" || d2d.Argv[1] != "-c" ||
		!reflect.DeepEqual(d2d.Argv[3:], []string{"d2d", "64", "3"}) {
		t.Errorf("d2d step %q", d2d.Argv)
	}
	env := envlist.Map(d2d.Env)
	if env["A"] != "1" || env["HIP_VISIBLE_DEVICES"] != "2,1" || env["CUDA_VISIBLE_DEVICES"] != "2,1" {
		t.Errorf("env %v: want the runtime indices 2,1 visible and A kept", env)
	}
	want := launch.ShimArgv("/amdrun", []int{4}, []int{2}, plan.MemBind, []string{"/py", "-c", probe, "h2d", "64", "3"})
	if last := steps[2]; last.Mode != "h2d" || last.NUMA != 2 || !reflect.DeepEqual(last.Argv, want) {
		t.Errorf("h2d step on node 2: %q", last.Argv)
	}
}

func TestStepsErrors(t *testing.T) {
	m := model4(t)
	_, _, err := Steps(m, StepsSpec{Devices: []int{0, 4}})
	var de *DeviceError
	if !errors.As(err, &de) || err.Error() != "device 4 does not exist (4 devices)" {
		t.Errorf("err %v", err)
	}
	_, _, err = Steps(m, StepsSpec{HostNUMA: func() ([]topology.NUMANode, error) { return nil, errors.New("no sysfs") }})
	if err == nil || !strings.Contains(err.Error(), "host NUMA nodes: no sysfs") {
		t.Errorf("err %v", err)
	}
	steps, _, err := Steps(m, StepsSpec{Python: "python3"}) // no HostNUMA: device-to-device only
	if err != nil || len(steps) != 1 {
		t.Errorf("%d steps, err %v", len(steps), err)
	}
}
