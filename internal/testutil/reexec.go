package testutil

import (
	"os"
	"testing"
)

// Role is a program a test binary stands in for when it re-executes
// itself: Env selects it when that variable is set, Arg when it is
// os.Args[1].
type Role struct {
	// Env is the selecting variable, whose value Run gets; "": none.
	Env string
	// Arg is the selecting first argument; Run gets those after it.
	Arg string
	// Run is the role's main; its result is the exit status.
	Run func(value string, args []string) int
}

// Main runs the first of roles selected (Dispatch), or the tests.
func Main(m *testing.M, roles ...Role) {
	Dispatch(roles...)
	os.Exit(m.Run())
}

// Dispatch runs the first role selected, in order, argument before
// environment, and exits with its status; it returns when none is.
func Dispatch(roles ...Role) {
	for _, r := range roles {
		if r.Arg != "" && len(os.Args) > 1 && os.Args[1] == r.Arg {
			os.Exit(r.Run(r.Arg, os.Args[2:]))
		}
		if v := os.Getenv(r.Env); v != "" { // Getenv("") is ""
			os.Exit(r.Run(v, os.Args[1:]))
		}
	}
}
