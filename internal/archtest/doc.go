// Package archtest holds tests of the code's shape, read from the
// module's own source with go/ast: no non-test function is longer than a
// reader can hold (funclen_test.go), internal/job reads no flag by its
// name, and docs/architecture.md's table of where each setting lives
// names the fields the code declares (settings_test.go).
// It has no code of its own.
package archtest
