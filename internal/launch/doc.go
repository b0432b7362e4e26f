// Package launch runs a plan (package launch/plan) as a supervised
// group of worker processes: the bind shim and rank guard (amdrun
// re-executed, shim*.go), the containment modes (one type each behind
// one interface, contain*.go), the PID-namespace keeper (keeper_linux.go),
// the process tree (proctree_linux.go), the guard/keeper protocol
// (proto_linux.go), the log
// layout and output copying (logdir_linux.go, output.go), torch's error
// files (errorfile.go, errordir_linux.go), signal forwarding
// (signals.go), resource limits (limits*.go), fail-fast and restarts
// (run*.go).
//
// It owns supervision and is the only package that starts, signals or
// waits for a worker process; what to run (argv, environment, binding)
// is decided before, by package plan, and which devices by
// launch/reserve. It imports neither the selector nor the lease files.
package launch
