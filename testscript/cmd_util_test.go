package testscript_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// defaultWait bounds every wait in a journey. The daemons start in well under
// a second; the bound is generous because `go test ./...` runs other
// packages on the same two cores, and it is a deadline, not a sleep: the wait
// ends as soon as the condition holds.
const defaultWait = 30 * time.Second

// cmdWaitfor implements `waitfor socket|file|ready PATH [TIMEOUT]`, a wait
// bounded by TIMEOUT (default defaultWait) that fails when the deadline
// passes first:
//
//   - socket: PATH is a Unix socket that accepts a connection (closed at
//     once: the daemon sees a client that went away);
//   - file: PATH is a regular file (a symlink is not followed) that is not
//     empty;
//   - ready: PATH names a notifier (see cmdNotify) that received READY=1.
//
// With `!` it waits for PATH (socket or file) to be gone. The socket and file
// waits block on inotify events of PATH's directory (see waitPath), not on a
// timer.
func cmdWaitfor(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: waitfor socket|file|ready PATH [TIMEOUT]")
	}
	kind, path := args[0], ts.MkAbs(args[1])
	limit := defaultWait
	if len(args) == 3 {
		d, err := time.ParseDuration(args[2])
		ts.Check(err)
		limit = d
	}
	if kind == "ready" {
		if neg {
			ts.Fatalf("unsupported: ! waitfor ready")
		}
		waitReady(ts, args[1], limit)
		return
	}
	var ready func() error
	switch kind {
	case "socket":
		ready = func() error { return socketAccepts(path) }
	case "file":
		ready = func() error { return fileNotEmpty(path) }
	default:
		ts.Fatalf("waitfor: unknown kind %q (socket or file)", kind)
	}
	if neg {
		ready = func() error { return pathGone(path) }
	}
	err := waitPath(path, limit, ready)
	var stuck *notReadyError
	if errors.As(err, &stuck) {
		ts.Fatalf("waitfor %s %s: not ready after %v: %v", kind, args[1], limit, stuck.last)
	}
	ts.Check(err)
}

// cmdRepeat implements `repeat VAR TEXT N`: sets VAR to TEXT repeated N times,
// so a journey can build an argument exactly at a bound and one past it.
func cmdRepeat(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: repeat VAR TEXT N")
	}
	n, err := strconv.Atoi(args[2])
	ts.Check(err)
	ts.Setenv(args[0], strings.Repeat(args[1], n))
}

// cmdJSONEnv implements `jsonenv FILE VAR=PATH...`: reads a JSON document
// from FILE ("stdout" or "stderr" for the last command's output: all of it,
// or else its last non-empty line) and
// sets each VAR to the value at the dotted PATH (strings as they are, other
// values as compact JSON). A missing path fails the journey.
func cmdJSONEnv(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: jsonenv FILE VAR=PATH...")
	}
	text := ts.ReadFile(args[0])
	doc, err := decodeJSON(text)
	if err != nil && (args[0] == "stdout" || args[0] == "stderr") {
		// A command that logs before its JSON: take the last line.
		lines := strings.Split(strings.TrimSpace(text), "\n")
		doc, err = decodeJSON(lines[len(lines)-1])
	}
	if err != nil {
		ts.Fatalf("jsonenv: %s: %v", args[0], err)
	}
	for _, a := range args[1:] {
		name, path, ok := strings.Cut(a, "=")
		if !ok {
			ts.Fatalf("jsonenv: %q is not VAR=PATH", a)
		}
		v, err := jsonPath(doc, path)
		if err != nil {
			ts.Fatalf("jsonenv: %s: %v", args[0], err)
		}
		ts.Setenv(name, v)
	}
}

// jsonPath walks a dotted path of object keys and array indexes.
func jsonPath(doc any, path string) (string, error) {
	cur := doc
	for _, key := range strings.Split(path, ".") {
		switch node := cur.(type) {
		case map[string]any:
			next, ok := node[key]
			if !ok {
				return "", fmt.Errorf("no key %q in path %q", key, path)
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(node) {
				return "", fmt.Errorf("no index %q in path %q", key, path)
			}
			cur = node[i]
		default:
			return "", fmt.Errorf("path %q goes through a %T", path, cur)
		}
	}
	if s, ok := cur.(string); ok {
		return s, nil
	}
	b, err := json.Marshal(cur)
	return string(b), err
}

// cmdHTTPUnix implements `httpunix SOCKET METHOD PATH [BODY]`: one HTTP/1.1
// request to an application over its Unix socket. It prints `status N` and the
// body on the next line. Any status is a success of the command; the journey
// checks it with `stdout`.
func cmdHTTPUnix(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 3 || len(args) > 4 {
		ts.Fatalf("usage: httpunix SOCKET METHOD PATH [BODY]")
	}
	sock := ts.MkAbs(args[0])
	client := &http.Client{
		Timeout: defaultWait,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", sock)
			},
		},
	}
	defer client.CloseIdleConnections()
	var body io.Reader
	if len(args) == 4 {
		body = strings.NewReader(args[3])
	}
	req, err := http.NewRequest(args[1], "http://app"+args[2], body)
	ts.Check(err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	ts.Check(err)
	defer resp.Body.Close()
	b, err := io.ReadAll(bufio.NewReader(resp.Body))
	ts.Check(err)
	fmt.Fprintf(ts.Stdout(), "status %d\n%s\n", resp.StatusCode, strings.TrimRight(string(b), "\n"))
}

// errUnknownCondition is the error for a condition no journey defines.
type errUnknownCondition string

func (e errUnknownCondition) Error() string { return "unknown condition " + string(e) }

// cmdExpand implements `expand FILE...`: replaces $VAR and ${VAR} in each
// file with the journey's variables, so that a config or request file in the
// archive can name paths under $WORK.
func cmdExpand(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: expand FILE...")
	}
	for _, f := range args {
		path := ts.MkAbs(f)
		b, err := os.ReadFile(path)
		ts.Check(err)
		// 0600, as an operator keeps what it hands steward (a route
		// request is refused otherwise): a script that shares a file
		// with another account says so (cpown).
		ts.Check(os.WriteFile(path, []byte(os.Expand(string(b), ts.Getenv)), 0o600))
		ts.Check(os.Chmod(path, 0o600))
	}
}

// decodeJSON decodes one JSON document, keeping numbers as written.
func decodeJSON(text string) (any, error) {
	var doc any
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one JSON document")
	}
	return doc, nil
}
