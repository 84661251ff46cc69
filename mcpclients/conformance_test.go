package mcpclients

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// conformanceScript is the suite's command-line entry, run with our Node
// (node_modules/.bin/conformance would run whichever node is on PATH).
const conformanceScript = "node_modules/@modelcontextprotocol/conformance/dist/index.js"

// conformanceTimeout bounds one run of the whole suite (about 5 s here).
const conformanceTimeout = 5 * time.Minute

// applicableScenarios are the suite's server scenarios that need none of
// its own test tools, prompts or resources: each must pass (no check
// FAILURE, at least one SUCCESS).
var applicableScenarios = []string{
	"server-initialize",           // initialize answered with a valid result
	"ping",                        // ping answered {}
	"tools-list",                  // every tool has a name, a description and an input schema
	"server-sse-multiple-streams", // three tools/list POSTs at once on one session, each answered
	"dns-rebinding-protection",    // a page's Origin is refused 4xx, a loopback one served (mcphttp.go webOriginRefusal)
}

// inapplicableScenarios are the suite's server scenarios that cannot apply
// to steward, each with why and the words of the failure the suite reports
// for it against steward today, which the test checks: a scenario that
// fails for any other reason, or passes, is a change to look at.
var inapplicableScenarios = map[string]struct{ why, failure string }{
	// The suite's own test tools: steward serves exactly its three tools,
	// and an unknown tool is refused as go-sdk does (-32602).
	"tools-call-simple-text":       {"calls the suite's test tool test_simple_text", `unknown tool "test_simple_text"`},
	"tools-call-image":             {"calls the suite's test tool test_image_content", `unknown tool "test_image_content"`},
	"tools-call-audio":             {"calls the suite's test tool test_audio_content", `unknown tool "test_audio_content"`},
	"tools-call-embedded-resource": {"calls the suite's test tool test_embedded_resource", `unknown tool "test_embedded_resource"`},
	"tools-call-mixed-content":     {"calls the suite's test tool test_multiple_content_types", `unknown tool "test_multiple_content_types"`},
	"tools-call-error":             {"calls the suite's test tool test_error_handling", `unknown tool "test_error_handling"`},
	"tools-call-with-progress":     {"calls the suite's test tool test_tool_with_progress", `unknown tool "test_tool_with_progress"`},
	"tools-call-sampling":          {"calls the suite's test tool test_sampling", `unknown tool "test_sampling"`},
	"tools-call-elicitation":       {"calls the suite's test tool test_elicitation", `unknown tool "test_elicitation"`},
	"elicitation-sep1034-defaults": {"calls the suite's test tool test_elicitation_sep1034_defaults", `unknown tool "test_elicitation_sep1034_defaults"`},
	"elicitation-sep1330-enums":    {"calls the suite's test tool test_elicitation_sep1330_enums", `unknown tool "test_elicitation_sep1330_enums"`},
	"json-schema-2020-12":          {"lists the suite's test tool json_schema_2020_12_tool", "Tool 'json_schema_2020_12_tool' not found"},
	// server-sse-polling calls the suite's test tool test_reconnection,
	// which closes its stream mid-call; against a server without it the
	// suite reports no check, only warnings (go-sdk sends no SSE priming
	// event or retry field on a POST's stream).
	"server-sse-polling": {"calls the suite's test tool test_reconnection", ""},
	// tools-call-with-logging sets a log level first (logging below), then
	// calls the suite's test tool test_tool_with_logging.
	"tools-call-with-logging": {"needs the logging capability and the suite's test tool test_tool_with_logging", `method not found: "logging/setLevel"`},
	// The logging capability: steward sends agents no log notifications,
	// so it does not declare logging, and logging/setLevel is a method of
	// servers that do; it is answered -32601 like every method of an
	// undeclared capability (mcpmethods.go, DESIGN.md section 7).
	"logging-set-level": {"needs the logging capability, which steward does not declare (it sends agents no log messages)", `method not found: "logging/setLevel"`},
	// The suite's prompts, its resources and completion of its prompt's
	// arguments: steward declares the tools capability alone.
	"completion-complete":           {"completes an argument of the suite's prompt test_prompt_with_arguments", `method not found: "completion/complete"`},
	"resources-list":                {"lists the suite's resources", `method not found: "resources/list"`},
	"resources-read-text":           {"reads the suite's resource test://static-text", `method not found: "resources/read"`},
	"resources-read-binary":         {"reads the suite's resource test://static-binary", `method not found: "resources/read"`},
	"resources-templates-read":      {"reads the suite's resource template test://template/{id}/data", `method not found: "resources/read"`},
	"resources-subscribe":           {"subscribes to the suite's resource", `method not found: "resources/subscribe"`},
	"resources-unsubscribe":         {"subscribes to, then unsubscribes from, the suite's resource", `method not found: "resources/subscribe"`},
	"prompts-list":                  {"lists the suite's prompts", `method not found: "prompts/list"`},
	"prompts-get-simple":            {"gets the suite's prompt test_simple_prompt", `method not found: "prompts/get"`},
	"prompts-get-with-args":         {"gets the suite's prompt test_prompt_with_arguments", `method not found: "prompts/get"`},
	"prompts-get-embedded-resource": {"gets the suite's prompt test_prompt_with_embedded_resource", `method not found: "prompts/get"`},
	"prompts-get-with-image":        {"gets the suite's prompt test_prompt_with_image", `method not found: "prompts/get"`},
}

// check is one entry of a scenario's checks.json.
type check struct {
	ID           string `json:"id"`
	Status       string `json:"status"` // SUCCESS, FAILURE, WARNING, INFO
	Description  string `json:"description"`
	ErrorMessage string `json:"errorMessage"`
}

// resultDir is the name the suite gives a scenario's results under -o:
// server-SCENARIO-TIMESTAMP.
var resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// TestConformance runs the official conformance suite, server mode, every
// scenario (--suite all, pending ones included), against the controller's
// streamable HTTP socket of a dev stack, through a loopback TCP forwarder,
// in one run. Every applicable scenario must pass; every other must fail
// exactly as inapplicableScenarios says; and the suite must run exactly
// the scenarios the two lists name, so that a new version's scenario is
// classified before it counts.
func TestConformance(t *testing.T) {
	env := needNode(t)
	m := startStack(t, true)
	url := "http://" + tcpForwarder(t, m.MCPHTTPSocket) + "/mcp"
	out := t.TempDir()
	r := env.run(t, context.Background(), conformanceTimeout, conformanceScript, "server", "--url", url, "--suite", "all", "-o", out)
	results := readResults(t, out)

	var ran []string
	for name := range results {
		ran = append(ran, name)
	}
	var want []string
	want = append(want, applicableScenarios...)
	for name := range inapplicableScenarios {
		want = append(want, name)
	}
	slices.Sort(ran)
	slices.Sort(want)
	if !slices.Equal(ran, want) {
		t.Errorf("the suite ran the scenarios\n  %s\nthe test classifies\n  %s\n(a scenario the suite added must be classified applicable or not, and why)",
			strings.Join(ran, " "), strings.Join(want, " "))
	}
	for _, name := range applicableScenarios {
		checks, ok := results[name]
		if !ok {
			continue // reported above
		}
		passed := 0
		for _, c := range checks {
			switch c.Status {
			case "SUCCESS":
				passed++
			case "FAILURE":
				t.Errorf("scenario %s: check %s failed: %s: %s", name, c.ID, c.Description, c.ErrorMessage)
			case "WARNING":
				t.Logf("scenario %s: check %s warns: %s: %s", name, c.ID, c.Description, c.ErrorMessage)
			}
		}
		if passed == 0 {
			t.Errorf("scenario %s: no check passed: %+v", name, checks)
		}
	}
	for name, na := range inapplicableScenarios {
		checks, ok := results[name]
		if !ok {
			continue
		}
		if !failsAs(checks, na.failure) {
			t.Errorf("scenario %s cannot apply (it %s) and was to fail with %q; its checks: %+v", name, na.why, na.failure, checks)
		}
	}
	if t.Failed() {
		t.Logf("the suite exited %d\nstdout:\n%s\nstderr:\n%s", r.exit, r.stdout, r.stderr)
	}
}

// failsAs reports whether a scenario that cannot apply ended as expected:
// with failure "", no check passed or failed (the suite only warned);
// else no check passed and a failed one's message contains failure.
func failsAs(checks []check, failure string) bool {
	found := false
	for _, c := range checks {
		switch {
		case c.Status == "SUCCESS":
			return false
		case c.Status == "FAILURE" && failure == "":
			return false
		case c.Status == "FAILURE" && strings.Contains(c.ErrorMessage, failure):
			found = true
		}
	}
	return found || failure == ""
}

// readResults reads every scenario's checks.json under the suite's -o
// directory, by scenario name.
func readResults(t *testing.T, dir string) map[string][]check {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	results := map[string][]check{}
	for _, e := range entries {
		m := resultDir.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			t.Errorf("the suite wrote %s, which is not a scenario's result directory", e.Name())
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			t.Errorf("scenario %s: %v", m[1], err)
			continue
		}
		var checks []check
		if err := json.Unmarshal(raw, &checks); err != nil {
			t.Errorf("scenario %s: checks.json: %v", m[1], err)
			continue
		}
		if _, dup := results[m[1]]; dup {
			t.Errorf("scenario %s has two result directories", m[1])
		}
		results[m[1]] = checks
	}
	return results
}
