package launch

import "golang.org/x/sys/unix"

// OwnCPUs returns the CPUs this process may run on (sched_getaffinity: a
// cgroup, taskset or Slurm step may narrow them); nil when unknown.
func OwnCPUs() []int {
	var cs unix.CPUSet
	if err := unix.SchedGetaffinity(0, &cs); err != nil {
		return nil
	}
	var cpus []int
	for cpu := 0; cpu < len(cs)*64; cpu++ {
		if cs.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	return cpus
}
