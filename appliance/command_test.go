package appliance

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stewardrt/steward/oracleops"
)

func TestCommandHelpAndUsage(t *testing.T) {
	for _, c := range []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{[]string{"--help"}, 0, "Usage:\n  steward-appliance serve --socket PATH", ""},
		{[]string{"help"}, 0, "Commands:\n  serve", ""},
		{[]string{"serve", "--help"}, 0, "-socket string", ""},
		{[]string{"serve", "-h"}, 0, "Prints \"ready PATH\" on stdout", ""},
		{nil, 2, "", "Usage:"},
		{[]string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{[]string{"serve"}, 2, "", "--socket and --state are required"},
		{[]string{"serve", "--socket", "/x"}, 2, "", "--socket and --state are required"},
		{[]string{"serve", "--socket", "/x", "--state", "/y", "extra"}, 2, "", `unexpected argument "extra"`},
		{[]string{"serve", "--socket", "/x", "--state", "/y", "--log-level", "loud"}, 2, "", "--log-level"},
		{[]string{"serve", "--nope"}, 2, "", "flag provided but not defined: -nope"},
		{[]string{"serve", "--socket", "/x", "--state", "/y", "--prefix", "v1/"}, 1, "", "prefix: must start with /"},
		{[]string{"inspect", "--help"}, 0, "It writes nothing to the journal", ""},
		{[]string{"--help"}, 0, "  steward-appliance history archive --state DIR --to ARCHIVEDIR\n", ""},
		{[]string{"history", "--help"}, 0, "on a stopped appliance", ""},
		{[]string{"history", "archive", "--help"}, 0, "-to DIR", ""},
		{[]string{"history"}, 2, "", "Usage:\n  steward-appliance history snapshot --state DIR"},
		{[]string{"history", "archive", "--state", "/y"}, 2, "", "steward-appliance history archive: --state DIR and --to ARCHIVEDIR are required, and nothing else"},
		{[]string{"inspect"}, 2, "", "steward-appliance inspect: --state DIR is required, and nothing else"},
		{[]string{"inspect", "--state", "/y", "extra"}, 2, "", "steward-appliance inspect: --state DIR is required, and nothing else"},
		{[]string{"inspect", "--state", "/nonexistent/state"}, 1, "", "steward-appliance inspect: journal: lstat /nonexistent/state/journal: no such file or directory"},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(c.args, &stdout, &stderr)
		if code != c.code || !strings.Contains(stdout.String(), c.stdout) || !strings.Contains(stderr.String(), c.stderr) ||
			(c.stdout == "" && stdout.Len() != 0) {
			t.Errorf("%q: exit %d\nstdout: %s\nstderr: %s", c.args, code, stdout.String(), stderr.String())
		}
	}
}

// startCommand runs Main with args in a new process, as the
// steward-appliance command.
func startCommand(t *testing.T, args ...string) *child {
	t.Helper()
	return startProc(t, []string{childEnv + "=main"}, args...)
}

// invokeCalc asks calc.evaluate for 3 * 687 / 365.25 under prefix.
func invokeCalc(t *testing.T, c *http.Client, prefix, id string) (int, []byte) {
	t.Helper()
	r, err := oracleops.BuildInvoke(prefix, oracleops.InvokeBody{Arguments: json.RawMessage(`{"expression":"3 * 687 / 365.25"}`),
		ConversationID: "c", OperationID: "calc.evaluate", RequestID: id})
	if err != nil {
		t.Fatal(err)
	}
	req, err := r.HTTP(context.Background(), "http://appliance")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestCommandServe runs the real command in a new process: the socket is 0660
// and the state directory 0700 from the start, SIGINT and SIGTERM stop it
// cleanly and remove the socket, and a new process replays the answer.
func TestCommandServe(t *testing.T) {
	dir, err := os.MkdirTemp("", "sa-cmd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock, state := filepath.Join(dir, "a.sock"), filepath.Join(dir, "state")

	p := startCommand(t, "serve", "--socket", sock, "--state", state, "--prefix", "/api/x")
	p.waitReady(t, sock)
	fi, err := os.Lstat(sock)
	if err != nil || fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket: %v %v", fi.Mode(), err)
	}
	fi, err = os.Lstat(state)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state: %v %v", fi.Mode(), err)
	}
	c := unixClient(sock)
	status, first := invokeCalc(t, c, "/api/x", "cmd-1")
	if status != 200 || !strings.Contains(string(first), `"fraction":"2748/487"`) {
		t.Fatalf("%d %s", status, first)
	}
	if status, _ := invokeCalc(t, c, "/v1", "cmd-2"); status != 404 {
		t.Fatalf("default prefix answered under --prefix /api/x: %d", status)
	}
	c.CloseIdleConnections()
	p.cmd.Process.Signal(syscall.SIGINT)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGINT: %v\n%s", err, p.stderr)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
	if !strings.Contains(p.stderr.String(), "level=INFO msg=stopped") {
		t.Fatalf("no stop log:\n%s", p.stderr)
	}

	p = startCommand(t, "serve", "--socket", sock, "--state", state, "--prefix", "/api/x")
	p.waitReady(t, sock)
	c = unixClient(sock)
	status, again := invokeCalc(t, c, "/api/x", "cmd-1")
	if status != 200 || !bytes.Equal(again, first) {
		t.Fatalf("after restart: %d %s", status, again)
	}
	c.CloseIdleConnections()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.stderr)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
}

// TestCommandServeRefusals: a state directory others can enter, a live socket
// and a path that is not a socket are refused, and the command exits 1.
func TestCommandServeRefusals(t *testing.T) {
	dir, err := os.MkdirTemp("", "sa-cmd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o755)
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	live := filepath.Join(dir, "live.sock")
	ln, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--socket", filepath.Join(dir, "a.sock"), "--state", open}, "state directory " + open + ": mode 0755 lets others in; want 0700"},
		{[]string{"--socket", file, "--state", filepath.Join(dir, "s1")}, "socket " + file + ": exists and is not a socket"},
		{[]string{"--socket", live, "--state", filepath.Join(dir, "s2")}, "socket " + live + ": another process is listening on it"},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(append([]string{"serve"}, c.args...), &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), c.want) || stdout.Len() != 0 {
			t.Errorf("%q: exit %d\nstderr: %s", c.args, code, stderr.String())
		}
	}
}
