// Package deps holds no code: its test (deps_test.go) enforces the import
// rules of DESIGN.md section 11 against `go list -deps -json ./...`, in the
// style of Go's own src/go/build/deps_test.go. A rule names a package and
// what it may (or must not) reach through its non-test imports, directly
// or transitively; a violation fails with the import chain that causes it.
package deps
