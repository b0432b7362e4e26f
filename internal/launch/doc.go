// Package launch runs a plan as a supervised group of worker processes
// (docs/supervision.md). It is the only package that starts, signals or
// waits for a worker process; what to run is decided by package plan.
package launch
