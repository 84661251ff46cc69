package testscript_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// binaries is every steward command a journey may run.
var binaries = []string{
	"steward-operator",
	"steward-controller",
	"steward-installer",
	"steward-appliance",
	"steward-dev",
}

// binDir holds the commands built for this run of the journeys.
var binDir string

// TestMain builds every steward command from ../cmd with `go build` into a
// fresh directory, puts it first on PATH, and runs the journeys, which exec
// those binaries as real processes.
//
// The commands are built as a user builds them: without -race, even when
// this test binary has it. Under the race detector the daemons run about 25
// times slower (the dev journey: 51 s against 2.1 s on two cores), mostly
// in ML-DSA signing and in the journal's scan of its preallocated segment
// at every open; the same code runs with -race in each package's own tests.
// (testscript.Main, which runs the test binary itself under each command's
// name, would carry -race into every daemon, and steward-controller and
// steward-appliance parse their flags in their cmd mains, which cannot be
// called from here.)
func TestMain(m *testing.M) {
	if os.Getenv(dialEnv) != "" && len(os.Args) == 2 {
		os.Exit(dialHelper(os.Args[1]))
	}
	dir, err := buildCommands()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testscript:", err)
		os.Exit(2)
	}
	binDir = dir
	if err := installDialHelper(dir); err != nil {
		fmt.Fprintln(os.Stderr, "testscript:", err)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	os.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildCommands builds, in one `go build`, every command of binaries whose
// source exists under ../cmd, into a new directory readable and executable by
// every account (the accounts journey runs them as other users). A command
// without source is left out; the journeys that need it skip on
// [exec:NAME].
func buildCommands() (string, error) {
	var pkgs []string
	for _, name := range binaries {
		if _, err := os.Stat(filepath.Join("..", "cmd", name, "main.go")); err == nil {
			pkgs = append(pkgs, "./cmd/"+name)
		}
	}
	dir, err := os.MkdirTemp("", "steward-journey-bin-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	if len(pkgs) == 0 {
		return dir, nil
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(goroot(), "bin", "go")
	}
	cmd := exec.Command(gobin, append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("go build %s: %v\n%s", strings.Join(pkgs, " "), err, out)
	}
	return dir, nil
}

// goroot finds the Go installation from GOROOT, for a PATH without go.
func goroot() string {
	if r := os.Getenv("GOROOT"); r != "" {
		return r
	}
	return "/usr/local/go"
}
