package testscript_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README's two commands.
const (
	readmeRunCommand  = "go run ./cmd/steward-dev"
	readmeTestCommand = "go test -race ./..."
)

// readmeTimeout bounds each README command; `go run` may have to compile.
const readmeTimeout = 5 * time.Minute

// readmeCommands returns the shell commands the README shows: the lines of
// its code blocks (indented or fenced) that run the go command, with an
// optional "$ " prompt removed.
func readmeCommands(readme string) []string {
	var cmds []string
	fenced := false
	for _, line := range strings.Split(readme, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			fenced = !fenced
			continue
		}
		if !fenced && !strings.HasPrefix(line, "    ") && !strings.HasPrefix(line, "\t") {
			continue
		}
		trimmed = strings.TrimPrefix(trimmed, "$ ")
		if strings.HasPrefix(trimmed, "go ") {
			cmds = append(cmds, trimmed)
		}
	}
	return cmds
}

// TestReadme runs the commands of the README as written, from the module
// root, on a fresh state directory: the run command serves until
// interrupted (as by Ctrl-C), its --once form demonstrates a governed call
// and verifies the receipts, and `go install` installs the proxy. The test
// command is the one running this test; it is checked to be exactly the
// README's. STEWARD_README names another file to check instead (a proposed
// README before it is merged). A command in the README that this test does not know fails it:
// every command the README shows must be exercised here.
func TestReadme(t *testing.T) {
	if testing.Short() {
		t.Skip("runs `go run` and `go install`; skipped with -short")
	}
	readme := filepath.Join("..", "README.md")
	if p := os.Getenv("STEWARD_README"); p != "" {
		readme = p // a proposed README, checked before it replaces this one
	}
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	cmds := readmeCommands(string(b))
	have := map[string]bool{}
	for _, c := range cmds {
		have[c] = true
	}
	for _, want := range []string{readmeRunCommand, readmeTestCommand} {
		if !have[want] {
			t.Errorf("the README does not show the command %q (commands found: %q)", want, cmds)
		}
	}
	runs := map[string]func(t *testing.T, cmd string){
		readmeRunCommand:                      runServeUntilInterrupted,
		readmeRunCommand + " --once":          runOnce,
		"go install ./cmd/steward-controller": runInstall,
		readmeTestCommand:                     func(*testing.T, string) {}, // this test runs inside it
	}
	// The --once form is always run: it is how the run command shows a
	// governed call without serving forever.
	if !have[readmeRunCommand+" --once"] {
		cmds = append(cmds, readmeRunCommand+" --once")
	}
	for _, c := range cmds {
		run, ok := runs[c]
		if !ok {
			t.Errorf("the README shows %q, which TestReadme does not run: exercise it here or take it out of the README", c)
			continue
		}
		t.Run(strings.ReplaceAll(c, "/", "_"), func(t *testing.T) { run(t, c) })
	}
}

// readmeDirs are the directories a README command is pointed at, so that it
// touches nothing of the machine's: its XDG state and runtime directories,
// its TMPDIR and its Go bin directory.
type readmeDirs struct {
	state, runtime, tmp, bin string
}

// goCommand prepares a README command to run from the module root with its
// own state, runtime, temporary and Go bin directories.
func goCommand(t *testing.T, ctx context.Context, line string) (*exec.Cmd, readmeDirs) {
	base := t.TempDir()
	d := readmeDirs{
		state: filepath.Join(base, "state"),
		// Short: the sockets go there, and t.TempDir's names, made of the
		// test's name, may not fit a socket address.
		runtime: shortTempDir(t, "readme-run-"),
		tmp:     filepath.Join(base, "tmp"),
		bin:     filepath.Join(base, "bin"),
	}
	for _, dir := range []string{d.state, d.tmp} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	args := strings.Fields(line)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = ".."
	// TMPDIR is the command's own, but `go run` builds there too: keep the
	// go command's build directory where it was (GOTMPDIR).
	gotmp := os.Getenv("GOTMPDIR")
	if gotmp == "" {
		gotmp = os.TempDir()
	}
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+d.state, "XDG_RUNTIME_DIR="+d.runtime, "TMPDIR="+d.tmp,
		"GOTMPDIR="+gotmp, "GOBIN="+d.bin)
	return cmd, d
}

// checkEmpty fails the test if dir holds anything.
func checkEmpty(t *testing.T, what, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("%s %s holds %s after the command", what, dir, e.Name())
	}
}

// runOnce runs the --once form: its demonstration runs in a temporary state
// directory under TMPDIR that is gone afterwards, and the default state
// directory is never made.
func runOnce(t *testing.T, line string) {
	ctx, cancel := context.WithTimeout(context.Background(), readmeTimeout)
	defer cancel()
	cmd, d := goCommand(t, ctx, line)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	for _, want := range []string{
		"a temporary state directory " + filepath.Join(d.tmp, "steward-dev-once-"),
		"DEVELOPMENT MODE",
		"2748/487",
		"replayed true",
		"receipts verified.",
		"removed the temporary state directory " + filepath.Join(d.tmp, "steward-dev-once-"),
	} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("%s: the output lacks %q:\n%s", line, want, out)
		}
	}
	checkEmpty(t, "the state home", d.state)
	checkEmpty(t, "the runtime directory", d.runtime)
	checkEmpty(t, "TMPDIR", d.tmp)
}

// runServeUntilInterrupted runs the command in its own process group, waits
// (bounded) for it to say it serves, then interrupts the group as Ctrl-C in a
// terminal does, and expects a clean stop.
func runServeUntilInterrupted(t *testing.T, line string) {
	ctx, cancel := context.WithTimeout(context.Background(), readmeTimeout)
	defer cancel()
	cmd, d := goCommand(t, ctx, line)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	serving := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		said := false
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if !said && strings.Contains(sc.Text(), "steward-dev: serving") {
				said = true
				close(serving)
			}
		}
	}()
	select {
	case <-serving:
	case <-done:
		cmd.Wait()
		t.Fatalf("%s stopped before serving:\n%s%s", line, out.String(), stderr.String())
	case <-ctx.Done():
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("%s: not serving within %v", line, readmeTimeout)
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-done
	// `go run` itself exits 1 once it has seen an interrupt, whatever its
	// child does (a program that catches SIGINT and exits 0 gives the same),
	// so steward-dev's clean stop is read from what it says: the three
	// daemons stopped and their sockets gone.
	err = cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		t.Fatalf("%s after Ctrl-C: %v\n%s%s", line, err, out.String(), stderr.String())
	}
	if !strings.Contains(out.String(), "steward-dev: stopped: journals closed, sockets removed.") {
		t.Errorf("%s: no clean stop after Ctrl-C:\n%s%s", line, out.String(), stderr.String())
	}
	if strings.Contains(stderr.String(), "steward-dev:") {
		t.Errorf("%s: steward-dev reported an error:\n%s", line, stderr.String())
	}
	def := filepath.Join(d.state, "steward-dev")
	if !strings.Contains(out.String(), "steward-dev: the state directory "+def+" (the default") {
		t.Errorf("%s: does not say it uses the default state directory %s:\n%s", line, def, out.String())
	}
	if _, err := os.Stat(filepath.Join(def, "dev.json")); err != nil {
		t.Errorf("%s: the default state directory: %v", line, err)
	}
	checkEmpty(t, "the runtime directory", d.runtime)
}

func runInstall(t *testing.T, line string) {
	ctx, cancel := context.WithTimeout(context.Background(), readmeTimeout)
	defer cancel()
	cmd, d := goCommand(t, ctx, line)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	bin := filepath.Join(d.bin, "steward-controller")
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "steward-controller mcp --socket PATH") {
		t.Fatalf("%s --help after %s: %v\n%s", bin, line, err, out)
	}
}

// TestReadmeCommands pins which lines of a README count as commands.
func TestReadmeCommands(t *testing.T) {
	text := "Intro with go run inline.\n\n    go run ./cmd/steward-dev\n\n```sh\n$ go test -race ./...\n```\n\n```json\n{\"command\": \"go\"}\n```\n\n    not a command\n\tgo install ./cmd/steward-controller\n"
	got := readmeCommands(text)
	want := []string{"go run ./cmd/steward-dev", "go test -race ./...", "go install ./cmd/steward-controller"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("readmeCommands = %q, want %q", got, want)
	}
}

// readmeJourney is a line of the README's list of journeys:
// "- `DIR/testdata/NAME.txtar`: what it proves".
var readmeJourney = regexp.MustCompile("^\\s*- `((?:testscript|hostjourney)/testdata/[^`/]+\\.txtar)`: (\\S.*)$")

// readmeJourneys returns the journeys the README lists, in its order.
func readmeJourneys(readme string) []string {
	var out []string
	for _, line := range strings.Split(readme, "\n") {
		if m := readmeJourney.FindStringSubmatch(line); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

// TestReadmeListsEveryJourney holds the README's list of acceptance
// journeys to the journeys there are: every testdata/*.txtar of this
// package (TestJourneys) and of hostjourney (TestHostJourney), each once,
// with a line saying what it proves, and no other. STEWARD_README names
// another file to check, as for TestReadme.
func TestReadmeListsEveryJourney(t *testing.T) {
	readme := filepath.Join("..", "README.md")
	if p := os.Getenv("STEWARD_README"); p != "" {
		readme = p
	}
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, dir := range []string{"testscript", "hostjourney"} {
		files, err := filepath.Glob(filepath.Join("..", dir, "testdata", "*.txtar"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("no journeys in ../%s/testdata", dir)
		}
		for _, f := range files {
			want = append(want, dir+"/testdata/"+filepath.Base(f))
		}
	}
	got := readmeJourneys(string(b))
	listed := map[string]bool{}
	for _, j := range got {
		if listed[j] {
			t.Errorf("the README lists %s twice", j)
		}
		listed[j] = true
		if !slices.Contains(want, j) {
			t.Errorf("the README lists %s, which is no journey (there are %q)", j, want)
		}
	}
	for _, j := range want {
		if !listed[j] {
			t.Errorf("the README's \"Where things are\" does not list the journey %s: add a line \"- `%s`: what it proves\"", j, j)
		}
	}
}

// TestReadmeJourneys pins which lines of a README list a journey.
func TestReadmeJourneys(t *testing.T) {
	text := "- `testscript/testdata/a.txtar`: proves a\n  - `hostjourney/testdata/host.txtar`: proves b\n" +
		"- `testscript/testdata/b.txtar`:\n- `other/testdata/c.txtar`: no\n`testscript/testdata/d.txtar`: no list item\n"
	got := readmeJourneys(text)
	want := []string{"testscript/testdata/a.txtar", "hostjourney/testdata/host.txtar"}
	if !slices.Equal(got, want) {
		t.Fatalf("readmeJourneys = %q, want %q", got, want)
	}
}
