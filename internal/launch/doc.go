// Package launch runs a plan as a supervised group of worker processes:
// the bind shim and rank guard (amdrun re-executed, shim*.go), the
// containment modes (contain*.go), the PID-namespace keeper
// (keeper_linux.go), the process tree (proctree_linux.go), the guard/keeper
// protocol (proto_linux.go), logs and output (logdir_linux.go, output.go),
// torch's error files (errorfile.go, errordir_linux.go), signals
// (signals.go), limits (limits*.go), fail-fast and restarts (run*.go).
// It is the only package that starts, signals or waits for a worker
// process; what to run is decided before, by package plan.
package launch
