// Package archtest holds tests of the code's shape, read from the
// module's own source with go/ast: no non-test function is longer than a
// reader can hold (funclen_test.go), and no launch setting is copied
// through more than two structs on its way from its flag to the package
// that uses it (settings_test.go; the table is docs/architecture.md's).
// It has no code of its own.
package archtest
