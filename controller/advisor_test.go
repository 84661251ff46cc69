package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/internal/testenv"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// withAdvisor names the stack's advisor socket, beside its MCP socket.
func withAdvisor(m map[string]any) {
	sk := m["sockets"].(map[string]any)
	sk["advisor"] = filepath.Join(filepath.Dir(sk["mcp"].(string)), "advisor.sock")
}

// advisorClient connects an MCP client to sock through the real proxy
// binary (`steward-controller mcp --socket`), unchanged, as this process's
// account.
func advisorClient(t *testing.T, ctx context.Context, sock string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "steward-test-advisor", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(controllerBin(t), "mcp", "--socket", sock)}, nil)
	if err != nil {
		t.Fatalf("mcp connect to %s: %v", sock, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestAdvisorSocketRefusesUnnamedPeers: the advisor socket, bound by the
// controller at mode 0666, admits no peer that a named agent does not map:
// an MCP agent admitted by the legacy uid list ("uid:N") is refused there
// with one JSON-RPC error answering its first request, through the real
// proxy, and nothing is journaled or asked of the host.
func TestAdvisorSocketRefusesUnnamedPeers(t *testing.T) {
	s := newStack(t, stackOpts{edit: withAdvisor})
	s.startController()
	fi, err := os.Stat(s.cfg.Sockets.Advisor)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o666 {
		t.Fatalf("advisor socket: %v %v, want a socket of mode 0666", fi, err)
	}
	seq := s.lastSeq()
	got := proxyOnce(t, s.cfg.Sockets.Advisor, nil)
	want := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"steward: peer uid %d is not a named agent of this controller; the advisor socket serves only agents the operator names as advisors"}}`+"\n", os.Getuid())
	if got != want {
		t.Fatalf("a uid:N agent at the advisor socket:\n got %s\nwant %s", got, want)
	}
	// The same account is an agent on mcp.sock.
	if got := proxyOnce(t, s.cfg.Sockets.MCP, nil); strings.Contains(got, `"error"`) {
		t.Fatalf("mcp.sock refused the agent: %s", got)
	}
	if s.lastSeq() != seq {
		t.Fatal("a refused advisor peer journaled something")
	}
}

// standIn is a stand-in host for the advisor socket's control frames: it
// records every asks and advise it is sent and answers each with the next
// answer the test set.
type standIn struct {
	mu      sync.Mutex
	asks    []msg.Asks
	advises []msg.Advise
	// answer is what the next asks (or advise) is answered with.
	asksAnswer, adviseAnswer func() (string, any)
}

func (h *standIn) serve(req *wire.Envelope) (string, any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch req.T {
	case msg.TypeAsks:
		var a msg.Asks
		req.Decode(&a)
		h.asks = append(h.asks, a)
		return h.asksAnswer()
	case msg.TypeAdvise:
		var a msg.Advise
		req.Decode(&a)
		h.advises = append(h.advises, a)
		return h.adviseAnswer()
	}
	return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: "not served by this stand-in"}
}

func (h *standIn) set(asks, advise func() (string, any)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.asksAnswer, h.adviseAnswer = asks, advise
}

func (h *standIn) sent() ([]msg.Asks, []msg.Advise) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.asks), slices.Clone(h.advises)
}

// standInAsk is the ask the stand-in lists.
var standInAsk = msg.AskView{ID: "ask-0123456789ab", Attempt: "a1", Controller: "dev", Agent: "alpha", Conversation: "c1",
	Application: "appliance", Operation: "text.echo", RequestSHA256: "00", Arguments: []byte(`{"text":"hello"}`), Price: 5,
	Justification: "the user asked", RaisedAt: time.Date(2026, 12, 1, 15, 4, 5, 0, time.UTC).UnixMilli(),
	ExpiresAt: time.Date(2026, 12, 2, 15, 4, 5, 0, time.UTC).UnixMilli(), OnTimeout: msg.VerdictDeny, State: msg.AskPending}

// advisorStandInStack is a stack whose config names this process's
// account (root) as the agent "rev" and serves the advisor socket, with a
// stand-in host answering the control channel.
func advisorStandInStack(t *testing.T) (*stack, *standIn) {
	testenv.NeedRoot(t, "the named agent is the account root, which the test's proxy runs as")
	s := newStack(t, stackOpts{edit: func(m map[string]any) {
		withAdvisor(m)
		m["agents"] = map[string]any{"uids": []uint32{}, "gids": []uint32{}, "named": []any{map[string]string{"name": "rev", "account": "root"}}}
	}})
	h := &standIn{}
	listed := func() (string, any) { return msg.TypeAsksResult, msg.AsksResult{Asks: []msg.AskView{standInAsk}} }
	taken := func() (string, any) { return msg.TypeAdviseResult, msg.AdviseResult{Ask: standInAsk} }
	h.set(listed, taken)
	frameHost(t, s, h.serve)
	s.startController()
	return s, h
}

// adviseCall calls steward_advise and checks its result as a client would.
func adviseCall(t *testing.T, ctx context.Context, cs *mcp.ClientSession, args map[string]any) (AdviseAnswer, *mcp.CallToolResult) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolAdvise, Arguments: args})
	if err != nil {
		t.Fatalf("steward_advise: %v", err)
	}
	checkToolResult(t, ToolAdvise, res)
	var a AdviseAnswer
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &a); err != nil {
		t.Fatal(err)
	}
	return a, res
}

// TestAdvisorToolArguments: steward_advise's arguments are refused one past
// each bound (the sentence at 281 bytes, a line break in it, a verdict that
// is none of the three, a field it does not have, an ask id of another
// shape, a missing sentence) as isError results in steward's words, and
// nothing is sent to the host; at the bound (280 bytes) the answer is sent.
func TestAdvisorToolArguments(t *testing.T) {
	s, h := advisorStandInStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := advisorClient(t, ctx, s.cfg.Sockets.Advisor)
	ok := map[string]any{"ask": standInAsk.ID, "verdict": "approve", "sentence": "fine"}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for kk, vv := range ok {
			m[kk] = vv
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, c := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"a sentence one past the bound", with("sentence", strings.Repeat("s", msg.MaxAdviceSentence+1)),
			"arguments refused: sentence: 281 bytes is past the bound of 280 bytes"},
		{"a line break in the sentence", with("sentence", "fine\nand more"),
			"arguments refused: sentence: must be one line, but it has a line break at byte 4"},
		{"a carriage return in the sentence", with("sentence", "fine\r"),
			"arguments refused: sentence: must be one line, but it has a line break at byte 4"},
		{"an empty sentence", with("sentence", ""), "arguments refused: sentence: missing: one line of at most 280 bytes saying why"},
		{"no sentence", with("sentence", nil), "arguments refused: sentence: missing: one line of at most 280 bytes saying why"},
		{"an unknown verdict", with("verdict", "maybe"), `arguments refused: verdict: must be "approve", "deny" or "wait", not "maybe"`},
		{"a verdict in capitals", with("verdict", "APPROVE"), `arguments refused: verdict: must be "approve", "deny" or "wait", not "APPROVE"`},
		{"no verdict", with("verdict", nil), `arguments refused: verdict: missing: "approve", "deny" or "wait"`},
		{"an unknown field", with("note", "x"), "arguments refused: unknown field \"note\" (the fields are ask, verdict, sentence)"},
		{"a field in other case", with("Verdict", "deny"), "arguments refused: unknown field \"Verdict\" (did you mean \"verdict\"?)"},
		{"an ask id of another shape", with("ask", "ask-0123456789abc"), `arguments refused: ask: "ask-0123456789abc" is not an ask's id ("ask-" and 12 of 0-9 a-f, as steward_asks lists them)`},
		{"no ask", with("ask", nil), "arguments refused: ask: missing: the id of an ask steward_asks lists"},
		{"an ask that is a number", with("ask", 7), "arguments refused: ask: must be a string, not a number"},
	} {
		a, res := adviseCall(t, ctx, cs, c.args)
		if !res.IsError || a.Accepted || a.Reason != c.want || a.Ask != nil {
			t.Errorf("%s: isError %v %+v\nwant the reason %q", c.name, res.IsError, a, c.want)
		}
	}
	if _, advises := h.sent(); len(advises) != 0 {
		t.Fatalf("refused arguments reached the host: %+v", advises)
	}
	// At the bound, the answer is sent, naming the advisor and its account
	// (root, the test's) from SO_PEERCRED.
	at := with("sentence", strings.Repeat("é", msg.MaxAdviceSentence/2))
	if a, res := adviseCall(t, ctx, cs, at); res.IsError || !a.Accepted || a.Ask == nil || a.Ask.ID != standInAsk.ID {
		t.Fatalf("a sentence of 280 bytes: isError %v %+v", res.IsError, a)
	}
	_, advises := h.sent()
	if want := (msg.Advise{Advisor: "rev", Ask: standInAsk.ID, Verdict: msg.VerdictApprove, Sentence: strings.Repeat("é", 140), AdvisorUID: "uid:0"}); len(advises) != 1 || advises[0] != want {
		t.Fatalf("sent %+v, want %+v", advises, want)
	}
}

// TestAdvisorTools: an advisor's session lists exactly the two tools, each
// described, with every input field described, output schemas and
// annotations; steward_asks shows the host's asks (times as RFC 3339, the
// arguments as JSON); steward_advise's taken answer, its refusal by a bound
// (the ask as it stands) and by the host's approvals rules are not errors,
// a host that cannot be reached is; every frame names the advisor its
// uid maps. An agent the host does not name an advisor is refused at the
// socket with one JSON-RPC error answering its first request.
func TestAdvisorTools(t *testing.T) {
	s, h := advisorStandInStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := advisorClient(t, ctx, s.cfg.Sockets.Advisor)
	if got := cs.InitializeResult().Instructions; got != advisorInstructions || strings.Count(got, "\n") != 1 {
		t.Fatalf("instructions %q", got)
	}
	checkAdvisorToolList(t, ctx, cs)

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolAsks, Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	checkToolResult(t, ToolAsks, res)
	var listed AsksAnswer
	json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &listed)
	want := AdvisorAsk{ID: standInAsk.ID, Agent: "alpha", Conversation: "c1", Application: "appliance", Operation: "text.echo",
		Arguments: json.RawMessage(`{"text":"hello"}`), Price: 5, Justification: "the user asked",
		RaisedAt: "2026-12-01T15:04:05Z", ExpiresAt: "2026-12-02T15:04:05Z", OnTimeout: "deny", State: "pending"}
	if res.IsError || len(listed.Asks) != 1 || !reflect.DeepEqual(listed.Asks[0], want) {
		t.Fatalf("steward_asks: isError %v %+v\nwant %+v", res.IsError, listed, want)
	}
	if res, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolAsks, Arguments: map[string]any{"agent": "alpha"}}); !res.IsError ||
		!strings.Contains(res.Content[0].(*mcp.TextContent).Text, `unknown field \"agent\" (the fields are after)`) {
		t.Fatalf("steward_asks with an argument: %+v", res)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolCall, Arguments: map[string]any{}}); err == nil && !res.IsError {
		t.Fatalf("oracle_call answered on the advisor socket: %+v", res)
	}

	args := map[string]any{"ask": standInAsk.ID, "verdict": "deny", "sentence": "too expensive for a test"}
	spent := "agent answers spent: 3 of 3 for conversation c1; this ask waits for a human"
	h.set(nil, func() (string, any) {
		return msg.TypeAdviseResult, msg.AdviseResult{Ask: standInAsk, Refused: &msg.Refusal{Code: msg.CodeApprovals, Reason: spent}}
	})
	if a, res := adviseCall(t, ctx, cs, args); res.IsError || a.Accepted || a.Reason != spent || a.Ask == nil || a.Ask.State != "pending" {
		t.Fatalf("the bound held: isError %v %+v", res.IsError, a)
	}
	own := "an advisor never answers an ask raised by its own identity"
	h.set(nil, func() (string, any) { return msg.TypeRefused, msg.Refusal{Code: msg.CodeApprovals, Reason: own} })
	if a, res := adviseCall(t, ctx, cs, args); res.IsError || a.Accepted || a.Reason != own || a.Ask != nil {
		t.Fatalf("its own ask: isError %v %+v", res.IsError, a)
	}
	h.set(nil, func() (string, any) {
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeInternal, Reason: "the host failed"}
	})
	if a, res := adviseCall(t, ctx, cs, args); !res.IsError || a.Accepted || a.Reason != "the host failed" {
		t.Fatalf("a host's failure: isError %v %+v", res.IsError, a)
	}
	h.set(nil, func() (string, any) {
		return msg.TypeAdviseResult, msg.AdviseResult{Ask: standInAsk, Refused: &msg.Refusal{Code: msg.CodeJournal, Reason: "the host could not journal the answer; the ask is unchanged"}}
	})
	if a, res := adviseCall(t, ctx, cs, args); !res.IsError || a.Accepted || a.Reason != "the host could not journal the answer; the ask is unchanged" || a.Ask == nil {
		t.Fatalf("a journal failure: isError %v %+v", res.IsError, a)
	}
	h.set(nil, func() (string, any) {
		return msg.TypeAdviseResult, msg.AdviseResult{Refused: &msg.Refusal{Code: msg.CodeApprovals, Reason: "no ask ask-0123456789ab"}}
	})
	if a, res := adviseCall(t, ctx, cs, args); res.IsError || a.Accepted || a.Reason != "no ask ask-0123456789ab" || a.Ask != nil {
		t.Fatalf("an unknown ask: isError %v %+v", res.IsError, a)
	}
	asks, advises := h.sent()
	for _, a := range asks {
		if a.Advisor != "rev" {
			t.Errorf("asks names %q", a.Advisor)
		}
	}
	for _, a := range advises {
		if a.Advisor != "rev" || a.Verdict != msg.VerdictDeny || a.Sentence != "too expensive for a test" {
			t.Errorf("advise %+v", a)
		}
	}
	if len(asks) != 2 || len(advises) != 5 {
		t.Fatalf("sent %d asks (the session's start and one list) and %d advises, want 2 and 5", len(asks), len(advises))
	}

	// The host's word is asked at each session's start.
	h.set(func() (string, any) {
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeApprovals, Reason: "agent rev is not an advisor of any agent of controller dev"}
	}, nil)
	got := proxyOnce(t, s.cfg.Sockets.Advisor, nil)
	wantLine := `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"steward: agent \"rev\" is not an advisor: no agent limits of this controller's operator name it one; the advisor socket serves only advisors"}}` + "\n"
	if got != wantLine {
		t.Fatalf("an agent that is not an advisor:\n got %s\nwant %s", got, wantLine)
	}
}

// checkAdvisorToolList: exactly steward_asks and steward_advise, each with
// a description, every input field described, an output schema, and
// annotations (steward_asks read-only, steward_advise not).
func checkAdvisorToolList(t *testing.T, ctx context.Context, cs *mcp.ClientSession) {
	t.Helper()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" || tool.OutputSchema == nil || tool.Annotations == nil {
			t.Errorf("%s: description %q, output schema %v, annotations %v", tool.Name, tool.Description, tool.OutputSchema, tool.Annotations)
		}
		b, _ := json.Marshal(tool.InputSchema)
		var in struct {
			Properties map[string]map[string]any `json:"properties"`
		}
		json.Unmarshal(b, &in)
		for name, p := range in.Properties {
			if d, _ := p["description"].(string); d == "" {
				t.Errorf("%s: input field %s has no description", tool.Name, name)
			}
		}
		if ro := tool.Annotations != nil && tool.Annotations.ReadOnlyHint; ro != (tool.Name == ToolAsks) {
			t.Errorf("%s: read-only %v", tool.Name, ro)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{ToolAdvise, ToolAsks}) {
		t.Fatalf("tools %v, want exactly steward_advise and steward_asks", names)
	}
}

// TestAdvisorOutputSchemasDeclareEveryField: the advisor tools' output
// schemas declare exactly the JSON fields of their Go types.
func TestAdvisorOutputSchemasDeclareEveryField(t *testing.T) {
	for _, tc := range []struct {
		name   string
		schema map[string]any
		typ    reflect.Type
	}{
		{ToolAsks, asksOutputSchema(), reflect.TypeFor[AsksAnswer]()},
		{"asks items", property(asksOutputSchema(), "asks")["items"].(map[string]any), reflect.TypeFor[AdvisorAsk]()},
		{ToolAdvise, adviseOutputSchema(), reflect.TypeFor[AdviseAnswer]()},
		{"advise ask", property(adviseOutputSchema(), "ask"), reflect.TypeFor[AdvisorAsk]()},
	} {
		if fields, props := jsonFields(tc.typ), schemaProperties(tc.schema); !slices.Equal(fields, props) {
			t.Errorf("%s: the schema declares %v, the type has %v", tc.name, props, fields)
		}
	}
}

// TestAdvisorProxyLines: the real proxy binary, unchanged, against the
// advisor socket: mcp.sock's line handling holds there (a line one past
// the bound and a batch at a version without batches are answered with
// errors carrying their ids, and the session goes on to answer the next
// calls), and the two tools are served.
func TestAdvisorProxyLines(t *testing.T) {
	s, _ := advisorStandInStack(t)
	long := `{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"` + strings.Repeat("x", MaxMCPLine) + `"}}` + "\n"
	input := initializeLine +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		long +
		`[{"jsonrpc":"2.0","id":5,"method":"ping"}]` + "\n" +
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"steward_asks","arguments":{}}}` + "\n" +
		`{"jsonrpc":"2.0","id":4,"method":"ping"}` + "\n"
	lines, stderr, err := runProxyBinary(t, controllerBin(t), s.cfg.Sockets.Advisor, input)
	if err != nil {
		t.Fatalf("proxy: %v: %s", err, stderr)
	}
	got := map[string]string{}
	for _, l := range lines {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			if arr := []json.RawMessage{}; json.Unmarshal([]byte(l), &arr) == nil && len(arr) == 1 {
				json.Unmarshal(arr[0], &m)
			} else {
				t.Fatalf("not an answer: %s", l)
			}
		}
		switch {
		case m.Error != nil:
			got[string(m.ID)] = "error: " + m.Error.Message
		default:
			got[string(m.ID)] = "result: " + string(m.Result)
		}
	}
	if len(got) != 5 {
		t.Fatalf("answers %v, want ids 1 to 5", got)
	}
	// The proxy keeps the line bound before the socket does.
	if want := "error: steward mcp: request line of 65597 bytes exceeds the bound of 65536 bytes including the newline"; got["2"] != want {
		t.Errorf("the long line: %s", got["2"])
	}
	// The controller answers a batch as on mcp.sock (mcpbatch.go).
	if want := "error: steward: batches are not part of MCP protocol version 2025-06-18; send each message on a line of its own"; got["5"] != want {
		t.Errorf("the batch: %s", got["5"])
	}
	if !strings.HasPrefix(got["3"], "result: ") || !strings.Contains(got["3"], standInAsk.ID) {
		t.Errorf("steward_asks: %s", got["3"])
	}
	if got["4"] != "result: {}" || !strings.HasPrefix(got["1"], "result: ") {
		t.Errorf("ping and initialize: %s / %s", got["4"], got["1"])
	}
}
