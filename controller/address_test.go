package controller

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stewardrt/steward/oracleops"
)

// TestParseAddress: each form is read into its parts and formatted back
// the same; each refusal is one line naming what is wrong, every bound one
// past its limit.
func TestParseAddress(t *testing.T) {
	app64, op160 := strings.Repeat("a", MaxApplicationLen), "o"+strings.Repeat("p", oracleops.MaxOperationIDLen-1)
	for _, s := range []string{"appliance/calc.evaluate", "h-1.lan/appliance/calc.evaluate", "A.b_c-d/0x",
		app64 + "/" + op160, strings.Repeat("n", MaxNodeLen) + "/" + app64 + "/" + op160} {
		a, err := ParseAddress(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if a.String() != s {
			t.Fatalf("%s formats as %s", s, a)
		}
	}
	if len(app64+"/"+op160) != MaxAddressLen {
		t.Fatalf("the longest address is %d bytes, the bound %d", len(app64+"/"+op160), MaxAddressLen)
	}
	for _, v := range []struct{ in, want string }{
		{"appliance", `address: "appliance" is not APPLICATION/OPERATION or NODE/APPLICATION/OPERATION`},
		{"a/b/c/d", `address: "a/b/c/d" is not APPLICATION/OPERATION or NODE/APPLICATION/OPERATION`},
		{"", `address: "" is not APPLICATION/OPERATION or NODE/APPLICATION/OPERATION`},
		// one past the bound: the longest application and an operation id
		// one byte longer, and the reverse
		{app64 + "/" + op160 + "x", "address: APPLICATION/OPERATION of 226 bytes exceeds the bound of 225"},
		{app64 + "a/" + op160, "address: APPLICATION/OPERATION of 226 bytes exceeds the bound of 225"},
		{app64 + "a/op", `address: application name "` + app64 + `a" must be 1 to 64 bytes`},
		{"/calc.evaluate", `address: application name "" must be 1 to 64 bytes`},
		{"-app/calc.evaluate", `address: application name "-app": only A-Za-z0-9._- allowed, the first a letter or digit`},
		{"ap p/calc.evaluate", `address: application name "ap p": only A-Za-z0-9._- allowed, the first a letter or digit`},
		{"appliance/", "address: operationId: empty, must be 1 to 160 bytes"},
		{"appliance/.calc", `address: operationId: first byte '.' is not a letter or digit`},
		{"appliance/" + strings.Repeat("p", 161), "address: operationId: 161 bytes exceeds the bound of 160"},
		{strings.Repeat("n", MaxNodeLen+1) + "/appliance/calc.evaluate", `address: node name "` + strings.Repeat("n", MaxNodeLen+1) + `" must be 1 to 64 bytes`},
		{"/appliance/calc.evaluate", `address: node name "" must be 1 to 64 bytes`},
		{"h_ost!/appliance/calc.evaluate", `address: node name "h_ost!": only A-Za-z0-9._- allowed, the first a letter or digit`},
	} {
		_, err := ParseAddress(v.in)
		if err == nil || err.Error() != v.want {
			t.Errorf("%.40q: %v, want %s", v.in, err, v.want)
		}
	}
	// a long refusal quotes at most 80 bytes of what it was sent
	_, err := ParseAddress(strings.Repeat("x", 1000))
	if err == nil || len(err.Error()) > 200 {
		t.Fatalf("%v", err)
	}
}

// TestTarget: an address, application and operationId, or both when they
// agree; a node that is not this host refused in the words agents read.
func TestTarget(t *testing.T) {
	c := &Controller{hostname: "box1"}
	op := func(s string) *string { return &s }
	for _, v := range []struct {
		address, app string
		op           *string
		wantApp      string
		wantOp       string
		want         string
	}{
		{address: "appliance/calc.evaluate", wantApp: "appliance", wantOp: "calc.evaluate"},
		{address: "box1/appliance/calc.evaluate", wantApp: "appliance", wantOp: "calc.evaluate"},
		{address: "BOX1/appliance/calc.evaluate", wantApp: "appliance", wantOp: "calc.evaluate"},
		{address: "appliance/calc.evaluate", app: "appliance", op: op("calc.evaluate"), wantApp: "appliance", wantOp: "calc.evaluate"},
		{app: "appliance", op: op("calc.evaluate"), wantApp: "appliance", wantOp: "calc.evaluate"},
		{address: "box2/appliance/calc.evaluate", want: "arguments refused: node box2 is not this host (box1): steward reaches only its own host's applications today"},
		{address: "appliance/calc.evaluate", app: "other", want: `arguments refused: address appliance/calc.evaluate names application appliance but application is "other": give one, or both alike`},
		{address: "appliance/calc.evaluate", op: op("units.convert"), want: `arguments refused: address appliance/calc.evaluate names operation calc.evaluate but operationId is "units.convert": give one, or both alike`},
		{address: "appliance", want: `arguments refused: address: "appliance" is not APPLICATION/OPERATION or NODE/APPLICATION/OPERATION`},
	} {
		app, gotOp, err := c.target(v.address, v.app, v.op)
		if v.want != "" {
			if err == nil || err.Error() != v.want || !errors.Is(err, ErrArguments) {
				t.Errorf("%+v: %v, want %s", v, err, v.want)
			}
			continue
		}
		if err != nil || app != v.wantApp || gotOp == nil || *gotOp != v.wantOp {
			t.Errorf("%+v: %s %v %v", v, app, gotOp, err)
		}
	}
	unnamed := &Controller{}
	_, _, err := unnamed.target("box1/appliance/calc.evaluate", "", nil)
	if want := "arguments refused: node box1 is not this host (its name could not be read at start): steward reaches only its own host's applications today"; err == nil || err.Error() != want {
		t.Fatalf("%v, want %s", err, want)
	}
}

// TestPlanAddress: plan reads an address into the same request as
// application and operationId, and journals what the agent sent.
func TestPlanAddress(t *testing.T) {
	c := fuzzController(t)
	ctx := context.Background()
	byAddr, err := c.plan(ctx, ToolCall, []byte(`{"address":"appliance/calc.evaluate","requestId":"r1","conversationId":"c1","arguments":{}}`), "a")
	if err != nil {
		t.Fatal(err)
	}
	byName, err := c.plan(ctx, ToolCall, []byte(`{"application":"appliance","operationId":"calc.evaluate","requestId":"r1","conversationId":"c1","arguments":{}}`), "a")
	if err != nil {
		t.Fatal(err)
	}
	if byAddr.sha != byName.sha || byAddr.application != "appliance" || byAddr.operation != "calc.evaluate" {
		t.Fatalf("%+v\n%+v", byAddr, byName)
	}
	if string(byAddr.args) != `{"address":"appliance/calc.evaluate","arguments":{},"conversationId":"c1","requestId":"r1"}` {
		t.Fatalf("journaled arguments %s", byAddr.args)
	}
	d, err := c.plan(ctx, ToolDiscover, []byte(`{"address":"appliance/calc.evaluate"}`), "a")
	if err != nil || d.req.Path != "/v1/operations/calc.evaluate" {
		t.Fatalf("%+v %v", d, err)
	}
	for _, v := range []struct{ tool, raw, want string }{
		{ToolCall, `{"requestId":"r1","conversationId":"c1","arguments":{}}`, "arguments refused: application: missing: give address (APPLICATION/OPERATION), or application and operationId"},
		{ToolDiscover, `{"address":"appliance/calc.evaluate","query":"x"}`, "arguments refused: address names one operation: query, availability, limit and offset must be absent"},
		{ToolDiscover, `{"operationId":"calc.evaluate"}`, "arguments refused: application: missing: operationId names an operation of one application; give application too, or address"},
		{ToolDiscover, `{"query":"calc"}`, "arguments refused: application: missing: a search across applications is an MCP oracle_discover; here give application or address"},
		{ToolCall, `{"address":"nowhere/calc.evaluate","requestId":"r1","conversationId":"c1","arguments":{}}`, `arguments refused: application: "nowhere" is not an application of this controller (steward_overview lists them)`},
	} {
		_, err := c.plan(ctx, v.tool, []byte(v.raw), "a")
		if err == nil || err.Error() != v.want {
			t.Errorf("%s: %v, want %s", v.raw, err, v.want)
		}
	}
}

// FuzzAddress feeds an agent's bytes to the parser: it never panics, and
// what it accepts formats back to the same bytes within the bounds.
func FuzzAddress(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddress(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "address: ") {
				t.Fatalf("refusal is not one line starting address: %q", err)
			}
			return
		}
		if a.String() != s {
			t.Fatalf("%q formats as %q", s, a)
		}
		if len(a.Application)+1+len(a.Operation) > MaxAddressLen || len(a.Node) > MaxNodeLen || len(a.Application) > MaxApplicationLen {
			t.Fatalf("accepted past a bound: %+v", a)
		}
		if err := oracleops.ValidateOperationID(a.Operation); err != nil {
			t.Fatalf("accepted operation %q: %v", a.Operation, err)
		}
		if strings.Contains(a.Application, "/") || strings.Contains(a.Node, "/") {
			t.Fatalf("a part holds a slash: %+v", a)
		}
	})
}
