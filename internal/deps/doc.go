// Package deps holds no code: its tests enforce the rules of DESIGN.md
// section 11. deps_test.go checks the import rules against `go list -deps
// -json ./...`, in the style of Go's own src/go/build/deps_test.go: a rule
// names a package and what it may (or must not) reach through its non-test
// imports, directly or transitively; a violation fails with the import
// chain that causes it. size_test.go checks the size rules (files,
// functions, the operator's packages) and that no package uses another's
// exported package-level variables, over the module's non-test files
// parsed with go/parser; a violation fails naming the offender and its
// length or line.
package deps
