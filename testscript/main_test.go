package testscript_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// binaries is every steward command a journey may run, in the order they are
// reported.
var binaries = []string{
	"steward-operator",
	"steward-controller",
	"steward-installer",
	"steward-appliance",
	"steward-dev",
}

// builtDir holds the commands that had to be built with `go build` because
// their package exposes no entry point to register (see inProcess). Empty when
// every command runs in-process.
var builtDir string

// TestMain registers every command whose package exposes its entry point, so
// that `exec steward-operator ...` in a journey runs this test binary as a real
// child process under that name (testscript.Main). A command without such an
// entry point is built from its cmd/ directory with `go build` into a
// temporary directory put on PATH; a command whose cmd/ directory does not
// exist is left out, and the journeys that need it skip with a condition.
func TestMain(m *testing.M) {
	cmds := inProcess()
	if _, ok := cmds[filepath.Base(os.Args[0])]; !ok {
		// The top-level run of the test binary, not a command.
		dir, err := buildMissing(cmds)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testscript:", err)
			os.Exit(2)
		}
		builtDir = dir
		if dir != "" {
			defer os.RemoveAll(dir)
			os.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		}
	}
	testscript.Main(m, cmds)
}

// buildMissing builds every command of binaries that is not registered in
// cmds but whose source exists under ../cmd, into a fresh directory it
// returns ("" when nothing needed building).
func buildMissing(cmds map[string]func()) (string, error) {
	var missing []string
	for _, name := range binaries {
		if _, ok := cmds[name]; ok {
			continue
		}
		if _, err := os.Stat(filepath.Join("..", "cmd", name, "main.go")); err != nil {
			continue
		}
		missing = append(missing, name)
	}
	if len(missing) == 0 {
		return "", nil
	}
	dir, err := os.MkdirTemp("", "steward-journey-bin")
	if err != nil {
		return "", err
	}
	// Accounts other than root run these binaries in the accounts journey.
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	for _, name := range missing {
		args := []string{"build", "-o", filepath.Join(dir, name)}
		if raceEnabled {
			args = append(args, "-race")
		}
		args = append(args, "./cmd/"+name)
		cmd := exec.Command("go", args...)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("go build ./cmd/%s: %v\n%s", name, err, out)
		}
	}
	return dir, nil
}
