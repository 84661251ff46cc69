package installer

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stewardrt/steward/dev"
	"github.com/stewardrt/steward/internal/testenv"
)

// lineWatch closes ch when a write contains want: the dev stack says it
// serves once every daemon is ready.
type lineWatch struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	ch   chan struct{}
	done bool
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.done && strings.Contains(w.buf.String(), w.want) {
		w.done = true
		close(w.ch)
	}
	return len(p), nil
}

// startDev runs the whole stack (appliance, host, controller: package dev)
// in this process on a fresh state dir until the test ends (or stop is
// called), and returns its layout once every daemon is ready.
func startDev(t *testing.T) (l dev.Layout, stop func()) {
	t.Helper()
	state := t.TempDir()
	var err error
	l, err = dev.NewLayout(state)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &lineWatch{want: "steward-dev: serving", ch: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		done <- dev.Run(ctx, dev.Options{State: state, Stdout: w, Logger: slog.New(slog.DiscardHandler)})
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("dev stack: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-w.ch:
	case err := <-done:
		done <- err
		t.Fatalf("dev stack stopped before serving: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("dev stack not serving within 60 s")
	}
	return l, stop
}

func decodeTool(t *testing.T, out string) toolOutput {
	t.Helper()
	var o toolOutput
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	return o
}

// TestControllerToolRoundTrip submits a tool request over a running
// controller's foreground socket, fetches its result, acknowledges it, and
// checks the controller forgot it; the controller's own refusal is exit 2.
func TestControllerToolRoundTrip(t *testing.T) {
	testenv.NeedRoot(t, "to dial the foreground socket, which admits root only")
	l, _ := startDev(t)
	env := Env{EUID: 0, SudoUID: strconv.FormatUint(uint64(operatorUID()), 10),
		Controller: ControllerEnv{Config: l.Config, Foreground: l.ForegroundSocket}}
	body := `{"tool":"oracle_discover","arguments":{"application":"appliance","query":"calc"}}`
	code, out, errs := run(t, env, "controller-tool", writeOperatorFile(t, "tool.json", []byte(body)))
	if code != ExitOK || errs != "" {
		t.Fatalf("controller-tool: exit %d\n%s%s", code, out, errs)
	}
	sub := decodeTool(t, out)
	if sub.State != "done" || checkRequestID(sub.ID) != nil || !json.Valid(sub.Result) || !strings.Contains(string(sub.Result), "calc") {
		t.Fatalf("controller-tool: %+v", sub)
	}

	code, out, errs = run(t, env, "controller-tool-result", sub.ID)
	if code != ExitOK || errs != "" {
		t.Fatalf("controller-tool-result: exit %d\n%s%s", code, out, errs)
	}
	if got := decodeTool(t, out); got.ID != sub.ID || got.State != "done" || !bytes.Equal(got.Result, sub.Result) {
		t.Fatalf("result %+v, want %+v", got, sub)
	}
	code, out, errs = run(t, env, "controller-tool-ack", sub.ID)
	if ack := decodeTool(t, out); code != ExitOK || ack.ID != sub.ID || ack.State != "done" || ack.Result != nil {
		t.Fatalf("controller-tool-ack: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = run(t, env, "controller-tool-result", sub.ID)
	if code != ExitRefused || out != "" || !strings.Contains(errs, "the controller refused the request: no foreground request \""+sub.ID+"\" awaits acknowledgement") {
		t.Fatalf("result after ack: exit %d\n%s%s", code, out, errs)
	}

	// The controller's refusal of a tool it does not run on this socket.
	code, out, errs = run(t, env, "controller-tool", writeOperatorFile(t, "tool.json", []byte(`{"tool":"steward_overview"}`)))
	if code != ExitRefused || out != "" || !strings.Contains(errs, `the controller refused the request: tool "steward_overview" cannot run on the foreground socket`) {
		t.Fatalf("foreign tool: exit %d\n%s%s", code, out, errs)
	}

	// The request bound: at 256 KiB the file is read (and runs); one byte
	// more is refused before anything is sent.
	pad := func(n int) []byte { return append([]byte(body), bytes.Repeat([]byte("\n"), n-len(body))...) }
	code, out, errs = run(t, env, "controller-tool", writeOperatorFile(t, "tool.json", pad(ToolRequestLimit)))
	if code != ExitOK || decodeTool(t, out).State != "done" {
		t.Fatalf("at the bound: exit %d\n%s%s", code, out, errs)
	}
	over := writeOperatorFile(t, "tool.json", pad(ToolRequestLimit+1))
	code, out, errs = run(t, env, "controller-tool", over)
	if code != ExitRefused || out != "" || !strings.Contains(errs, over+": too large: 262145 bytes, the limit is 262144") {
		t.Fatalf("one past the bound: exit %d\n%s%s", code, out, errs)
	}
}

// TestToolRequestShape: the request file's refusals.
func TestToolRequestShape(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"tool":"oracle_call","arguments":[]}`, `"arguments" is not a JSON object`},
		{`{"arguments":{}}`, `"tool" is missing or empty`},
		{`{"tool":"x","tool":"y"}`, `duplicate key "tool"`},
		{`{"tool":"x","extra":1}`, `unknown field "extra"`},
		{`{"tool":"x"} {}`, `after the value`},
	} {
		if _, err := parseToolRequest([]byte(c.body)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.body, err, c.want)
		}
	}
	r, err := parseToolRequest([]byte(`{"tool":"oracle_discover"}`))
	if err != nil || string(r.Arguments) != "{}" {
		t.Fatalf("absent arguments: %+v %v", r, err)
	}
}

// TestControllerAttemptsVerbs reaches the controller's attempts commands
// through the operator's verbs on a running controller: the list, and the
// controller's refusal of an attempt it does not know (exit 2); an id
// outside the alphabet is refused before anything is sent.
func TestControllerAttemptsVerbs(t *testing.T) {
	l, _ := startDev(t)
	env := Env{EUID: os.Geteuid(), SudoUID: strconv.FormatUint(uint64(operatorUID()), 10),
		Controller: ControllerEnv{Config: l.Config, Foreground: l.ForegroundSocket}}
	code, out, errs := run(t, env, "controller-attempts")
	if o := decodeTool(t, out); code != ExitOK || errs != "" || o.State != "done" || string(o.Result) != "[]" {
		t.Fatalf("controller-attempts: exit %d\n%s%s", code, out, errs)
	}
	for _, verb := range []string{"controller-attempt-inspect", "controller-attempt-resolve"} {
		code, out, errs = run(t, env, verb, "a-unknown")
		if code != ExitRefused || out != "" || !strings.Contains(errs, "steward-installer "+verb+": refused: the controller refused the request: ") ||
			!strings.Contains(errs, "a-unknown") {
			t.Fatalf("%s of an unknown attempt: exit %d\n%s%s", verb, code, out, errs)
		}
		code, out, errs = run(t, env, verb, "bad/id")
		if code != ExitRefused || out != "" || errs != "steward-installer "+verb+": refused: ID \"bad/id\" has byte '/' at offset 3, not one of A-Za-z0-9_-\n" {
			t.Fatalf("%s of a bad id: exit %d\n%s%s", verb, code, out, errs)
		}
	}
	rule := string(renderSudoers("/opt/steward/bin"))
	for _, want := range []string{"steward-installer controller-attempts,", "steward-installer controller-attempt-inspect *", "steward-installer controller-attempt-resolve *"} {
		if !strings.Contains(rule, want) {
			t.Errorf("the sudoers drop-in lacks %q:\n%s", want, rule)
		}
	}
}
