package lease

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// cpuFilesMade checks, where this process may not make lease files, that
// the first of cpus has one: a directory prepared before CPU leases has
// none, and Held would warn about every CPU.
func (d *Dir) cpuFilesMade(cpus []int) error {
	if len(cpus) == 0 || d.fd < 0 || d.mayCreate() {
		return nil
	}
	name, err := FileName(CPUKey(cpus[0]))
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("lease: %s: %w", filepath.Join(d.path, name), ErrNoCPUFiles)
	}
	return nil
}

// ListCPUs reports, by CPU, every CPU lease file that is held now or
// cannot be used.
func (d *Dir) ListCPUs() (map[int]State, error) {
	if d.fd < 0 {
		return map[int]State{}, nil
	}
	ents, err := names(d.fd, d.path)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, n := range ents {
		if k, ok := KeyFromFileName(n); ok {
			if _, isCPU := CPUOfKey(k); isCPU {
				keys = append(keys, k)
			}
		}
	}
	held, err := d.Held(keys)
	if err != nil {
		return nil, err
	}
	return byCPU(held), nil
}
