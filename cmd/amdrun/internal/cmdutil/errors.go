// Package cmdutil holds what every command shares: the Factory of lazy
// dependencies, flag errors and exit codes.
package cmdutil

import (
	"context"
	"errors"
	"fmt"
)

// Exit codes of amdrun's own failures. A launched job that fails makes
// amdrun exit with the first failing rank's code instead.
const (
	ExitOK    = 0
	ExitError = 1 // discovery, selection or launch failed
	ExitUsage = 2 // bad flag, flag value or argument
)

// FlagError is a misuse of flags or arguments: Main prints it with a hint
// to see --help and exits with ExitUsage.
type FlagError struct{ Err error }

func (e *FlagError) Error() string { return e.Err.Error() }
func (e *FlagError) Unwrap() error { return e.Err }

// FlagErrorf returns a *FlagError with a formatted message.
func FlagErrorf(format string, args ...any) error {
	return &FlagError{Err: fmt.Errorf(format, args...)}
}

// ExitCodeError carries an exit status not amdrun's own: a failed rank's.
type ExitCodeError struct{ Code int }

func (e *ExitCodeError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// ErrSilent makes Main exit with ExitError and print nothing more.
var ErrSilent = errors.New("silent error")

// Either is runF, a test's run function, when set, else run.
func Either[O any](runF, run func(context.Context, O) error) func(context.Context, O) error {
	if runF != nil {
		return runF
	}
	return run
}
