package appliance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stewardrt/steward/oracleops"
)

// childEnv makes the test binary, re-executed, run the appliance instead
// of the tests (see TestMain): "serve" runs Serve on the sockets named by
// the environment, "main" runs Main with the process's arguments, as the
// steward-appliance command does.
const childEnv = "STEWARD_APPLIANCE_TEST_CHILD"

// testSegmentSize keeps journals small in tests.
const testSegmentSize = 1 << 20

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "serve":
		os.Exit(childServe())
	case "main":
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// childServe is the appliance in a child process: it serves until SIGTERM
// and prints the ready line on stdout.
func childServe() int {
	every, _ := strconv.ParseUint(os.Getenv("STEWARD_APPLIANCE_SNAPSHOT_EVERY"), 10, 64)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err := Serve(ctx, Config{
		Socket: os.Getenv("STEWARD_APPLIANCE_SOCKET"),
		State:  os.Getenv("STEWARD_APPLIANCE_STATE"),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
		Ready:  os.Stdout,
		// Small segments: opening scans the preallocated tail.
		JournalSegmentSize: testSegmentSize,
		SnapshotEvery:      every,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// shortDir is a temporary directory with a short path: a Unix socket
// path must fit in 108 bytes.
func shortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "sa-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// quietLogger keeps test output to warnings and worse.
func quietLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// app is an appliance under test and an HTTP client on its socket.
type app struct {
	t      testing.TB
	srv    *Server // nil when the appliance is a child process
	sock   string
	state  string
	client *http.Client
}

func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		MaxIdleConnsPerHost: 64,
	}}
}

// startApp runs an appliance in this process on a fresh socket and state
// directory (or the given state directory).
func startApp(t testing.TB, cfg Config) *app {
	t.Helper()
	dir := shortDir(t)
	if cfg.Socket == "" {
		cfg.Socket = filepath.Join(dir, "a.sock")
	}
	if cfg.State == "" {
		cfg.State = filepath.Join(dir, "state")
	}
	if cfg.Logger == nil {
		cfg.Logger = quietLogger(t)
	}
	switch cfg.JournalSegmentSize {
	case 0:
		cfg.JournalSegmentSize = testSegmentSize
	case -1: // benchmarks: the journal's default
		cfg.JournalSegmentSize = 0
	}
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := &app{t: t, srv: s, sock: cfg.Socket, state: cfg.State, client: unixClient(cfg.Socket)}
	t.Cleanup(func() {
		a.client.CloseIdleConnections()
		s.Close()
	})
	return a
}

// close stops the in-process appliance now (its cleanup then does
// nothing more).
func (a *app) close() {
	a.t.Helper()
	a.client.CloseIdleConnections()
	if err := a.srv.Close(); err != nil {
		a.t.Fatal(err)
	}
}

// snapshotNames lists the snapshot files of state, oldest first.
func snapshotNames(t testing.TB, state string) []string {
	t.Helper()
	es, err := os.ReadDir(snapshotDir(state))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		if strings.HasSuffix(e.Name(), ".snap") && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	return names
}

// do sends one request and returns the status and body.
func (a *app) do(method, path string, body []byte) (int, []byte) {
	a.t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://appliance"+path, r)
	if err != nil {
		a.t.Fatal(err)
	}
	return a.send(req)
}

func (a *app) send(req *http.Request) (int, []byte) {
	a.t.Helper()
	resp, err := a.client.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		a.t.Fatalf("%s %s: content type %q", req.Method, req.URL.Path, ct)
	}
	return resp.StatusCode, b
}

// invoke builds the call the way the host does (oracleops.BuildInvoke)
// and sends it.
func (a *app) invoke(requestID, operationID, args string) (int, []byte) {
	a.t.Helper()
	r, err := oracleops.BuildInvoke(DefaultPrefix, oracleops.InvokeBody{
		Arguments: json.RawMessage(args), ConversationID: "conv-1", OperationID: operationID, RequestID: requestID,
	})
	if err != nil {
		a.t.Fatal(err)
	}
	req, err := r.HTTP(context.Background(), "http://appliance")
	if err != nil {
		a.t.Fatal(err)
	}
	return a.send(req)
}

// invokeBody sends inv as the host does.
func (a *app) invokeBody(inv oracleops.InvokeBody) (int, []byte) {
	a.t.Helper()
	r, err := oracleops.BuildInvoke(DefaultPrefix, inv)
	if err != nil {
		a.t.Fatal(err)
	}
	req, err := r.HTTP(context.Background(), "http://appliance")
	if err != nil {
		a.t.Fatal(err)
	}
	return a.send(req)
}

// records is the number of records in the in-process appliance's journal.
func (a *app) records() uint64 { return a.srv.journal.LastSeq() }

// errorOf decodes an error answer.
func errorOf(t testing.TB, body []byte) errorObject {
	t.Helper()
	var e struct {
		Error *struct {
			Code    string          `json:"code"`
			Message string          `json:"message"`
			Details json.RawMessage `json:"details"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error == nil {
		t.Fatalf("not an error answer: %s (%v)", body, err)
	}
	return errorObject{Code: e.Error.Code, Message: e.Error.Message, Details: e.Error.Details}
}

// child is an appliance running in a re-executed test binary.
type child struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	ready  chan string // the first line the child prints on stdout
}

// startProc re-executes the test binary with env added and args, and
// collects its first stdout line; the process is killed at cleanup if the
// test has not waited for it.
func startProc(t testing.TB, env []string, args ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), env...)
	return startCmd(t, cmd)
}

// startCmd starts cmd and collects its first stdout line; the process is
// killed at cleanup if the test has not waited for it.
func startCmd(t testing.TB, cmd *exec.Cmd) *child {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stderr: &bytes.Buffer{}, ready: make(chan string, 1)}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		c.ready <- l
		io.Copy(io.Discard, stdout)
	}()
	return c
}

// waitReady waits, bounded, for the ready line naming sock.
func (c *child) waitReady(t testing.TB, sock string) {
	t.Helper()
	select {
	case l := <-c.ready:
		if l != "ready "+sock+"\n" {
			t.Fatalf("child said %q; stderr:\n%s", l, c.stderr)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("child not ready within 60 s; stderr:\n%s", c.stderr)
	}
}

// startChild starts the appliance in a new process on sock and state and
// waits (bounded) for its ready line. extraEnv arms failpoints.
func startChild(t testing.TB, sock, state string, extraEnv ...string) *child {
	t.Helper()
	env := append([]string{childEnv + "=serve", "STEWARD_APPLIANCE_SOCKET=" + sock, "STEWARD_APPLIANCE_STATE=" + state}, extraEnv...)
	c := startProc(t, env, "-test.run=^$")
	c.waitReady(t, sock)
	return c
}

// stop sends SIGTERM and waits for a clean exit.
func (c *child) stop(t testing.TB) {
	t.Helper()
	c.cmd.Process.Signal(syscall.SIGTERM)
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("child exit: %v; stderr:\n%s", err, c.stderr)
	}
}
