package mcpclients

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/testenv"
)

// nodeDir is the folder of the Node clients: package.json, its lock file,
// the scripts, and node_modules once `npm ci` has run there.
const nodeDir = "testdata/node"

// minNodeMajor is the oldest Node the conformance suite runs on; the
// journey uses the same Node.
const minNodeMajor = 22

// installHint is how a developer installs what these tests need.
const installHint = "run `npm ci` in mcpclients/testdata/node (.ci/run does)"

// nodeEnv is the installed Node and clients.
type nodeEnv struct {
	dir  string // nodeDir, absolute
	node string // node_modules/node/bin/node: the node@22 package's binary
}

// needNode finds Node 22 and the pinned packages in nodeDir, or calls
// testenv.Missing (a skip, a failure under CI=true) saying what is missing.
func needNode(t *testing.T) nodeEnv {
	t.Helper()
	dir, err := filepath.Abs(nodeDir)
	if err != nil {
		t.Fatal(err)
	}
	env := nodeEnv{dir: dir, node: filepath.Join(dir, "node_modules", "node", "bin", "node")}
	if _, err := os.Stat(env.node); err != nil {
		testenv.Missing(t, "no Node %d binary at %s (%v): %s", minNodeMajor, env.node, err, installHint)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, env.node, "--version").Output()
	if err != nil {
		testenv.Missing(t, "%s --version: %v: %s", env.node, err, installHint)
	}
	v := strings.TrimSpace(string(out))
	major, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(v, "v"), ".", 2)[0])
	if err != nil || major < minNodeMajor {
		testenv.Missing(t, "%s is Node %q; these tests need Node %d or later: %s", env.node, v, minNodeMajor, installHint)
	}
	if err := env.checkPinned(); err != nil {
		testenv.Missing(t, "%v: %s", err, installHint)
	}
	return env
}

// checkPinned checks that every dependency package.json pins is installed
// at that version: node_modules from another lock file is not what the
// tests were written against.
func (e nodeEnv) checkPinned() error {
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	raw, err := os.ReadFile(filepath.Join(e.dir, "package.json"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		return fmt.Errorf("%s/package.json: %w", e.dir, err)
	}
	for name, want := range pkg.Dependencies {
		var got struct {
			Version string `json:"version"`
		}
		raw, err := os.ReadFile(filepath.Join(e.dir, "node_modules", name, "package.json"))
		if err != nil {
			return fmt.Errorf("the npm package %s is not installed (%v)", name, err)
		}
		if err := json.Unmarshal(raw, &got); err != nil || got.Version != want {
			return fmt.Errorf("the npm package %s is installed at %q, package.json pins %q", name, got.Version, want)
		}
	}
	return nil
}

// nodeRun is one finished Node child.
type nodeRun struct {
	stdout, stderr []byte
	exit           int // the exit code; -1 when killed by a signal
}

// run runs Node on args in e.dir, bounded by timeout: past it, or when ctx
// ends, the child's whole process group (the child and whatever it
// spawned, such as the stdio proxy) is killed. It fails t only when Node
// could not be started; the exit code is the caller's to judge.
func (e nodeEnv) run(t *testing.T, ctx context.Context, timeout time.Duration, args ...string) nodeRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.node, args...)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second // pipes a surviving grandchild holds open
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	// A child that exited on its own may leave a grandchild behind.
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	r := nodeRun{stdout: stdout.Bytes(), stderr: stderr.Bytes()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.exit = ee.ExitCode()
	case errors.Is(err, exec.ErrWaitDelay):
		r.exit = cmd.ProcessState.ExitCode()
	default:
		t.Fatalf("node %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	if ctx.Err() != nil {
		t.Fatalf("node %s: killed after %v (%v)\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), timeout, ctx.Err(), r.stdout, r.stderr)
	}
	return r
}
