package cmdutil

import "github.com/amdrun/amdrun/internal/launch/lease"

// OpenLeases opens the node's lease directory: flag, else
// $AMDRUN_LEASE_DIR, else lease.DefaultDir with its fallbacks.
func OpenLeases(f *Factory, flag string) (*lease.Dir, error) {
	if flag == "" {
		flag = f.Getenv("AMDRUN_LEASE_DIR")
	}
	if flag != "" {
		return lease.Open(flag, f.Warn)
	}
	return lease.OpenDefault(lease.DefaultDir, f.Warn)
}
