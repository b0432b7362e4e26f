//go:build !linux

package launch

// OwnCPUs is unknown off Linux: nil means every CPU of the host's NUMA
// nodes (a plan made here describes another machine anyway).
func OwnCPUs() []int { return nil }
