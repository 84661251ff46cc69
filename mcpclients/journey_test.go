package mcpclients

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"
)

// journeyTimeout bounds the whole journey script (a few seconds here).
const journeyTimeout = 3 * time.Minute

// journeyLine is one line the journey prints: a check, or the last line.
type journeyLine struct {
	Check   string `json:"check"`
	OK      bool   `json:"ok"`
	Message string `json:"message"`
	WaitsOn string `json:"waitsOn"` // the P17.md section whose work the check needs
	Done    bool   `json:"done"`
	Checks  int    `json:"checks"`
}

// TestSDKJourney runs testdata/node/journey.mjs: the official TypeScript
// SDK's client launches the stdio proxy (`steward-controller mcp --socket`)
// against a dev stack and walks an agent's journey, asserting each step
// itself. Each failed check fails this test with the script's own message;
// a check marked as waiting on another section's work is logged while it
// fails and fails the test once it passes (its mark is then to go).
func TestSDKJourney(t *testing.T) {
	env := needNode(t)
	proxy := proxyBinary(t)
	m := startStack(t, false)
	r := env.run(t, context.Background(), journeyTimeout, "journey.mjs", proxy, m.MCPSocket)

	var done bool
	var checks, failed int
	sc := bufio.NewScanner(bytes.NewReader(r.stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l journeyLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Errorf("the journey printed a line that is not a check: %s", sc.Bytes())
			continue
		}
		switch {
		case l.Done:
			done = true
			if l.Checks != checks {
				t.Errorf("the journey says it made %d checks; it printed %d", l.Checks, checks)
			}
			continue
		case l.WaitsOn != "" && !l.OK:
			t.Logf("waits on section %s (P17.md): %s: %s", l.WaitsOn, l.Check, l.Message)
		case l.WaitsOn != "":
			failed++
			t.Errorf("%s: %s", l.Check, l.Message)
		case !l.OK:
			failed++
			t.Errorf("%s: %s", l.Check, l.Message)
		default:
			t.Logf("ok: %s", l.Check)
		}
		checks++
	}
	if !done {
		t.Errorf("the journey ended before its last line (exit %d)", r.exit)
	}
	if (r.exit == 0) != (failed == 0) || r.exit < 0 || r.exit > 1 {
		t.Errorf("the journey exited %d with %d failed checks", r.exit, failed)
	}
	if t.Failed() {
		t.Logf("the journey's stderr (the SDK's and the proxy's):\n%s", r.stderr)
	}
}
