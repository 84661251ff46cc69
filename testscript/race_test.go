//go:build race

package testscript_test

// raceEnabled is true when the test binary was built with -race; commands
// built with `go build` are then built with -race too.
const raceEnabled = true
