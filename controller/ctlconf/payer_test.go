package ctlconf

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestPayerPrincipals: overrides apply to the principal they name; the
// number of overrides is bounded one past; a name that is not a principal
// is refused naming it.
func TestPayerPrincipals(t *testing.T) {
	p := &Payer{MaxPerCall: 5, PerDay: 20, Principals: map[string]PayerLimits{"uid:1000": {MaxPerCall: 1, PerDay: 2}}}
	if err := p.validate(); err != nil {
		t.Fatal(err)
	}
	if l := p.Limits("uid:1000"); l != (PayerLimits{1, 2}) {
		t.Fatalf("override: %+v", l)
	}
	if l := p.Limits("uid:1001"); l != (PayerLimits{5, 20}) {
		t.Fatalf("default: %+v", l)
	}
	if l := p.Limits(PrincipalForeground); l != (PayerLimits{}) {
		t.Fatalf("the foreground without an allowance: %+v, want none of the defaults", l)
	}
	many := map[string]PayerLimits{}
	for i := range MaxPayerPrincipals {
		many[UIDPrincipal(uint32(i))] = PayerLimits{}
	}
	if err := (&Payer{Principals: many}).validate(); err != nil {
		t.Fatalf("at the bound: %v", err)
	}
	many["foreground"] = PayerLimits{}
	if err := (&Payer{Principals: many}).validate(); err == nil || err.Error() != fmt.Sprintf("payer.principals: %d principals exceeds the bound of %d", MaxPayerPrincipals+1, MaxPayerPrincipals) {
		t.Fatalf("one past the bound: %v", err)
	}
	for _, bad := range []string{"uid:", "uid:01", "uid:4294967296", "uid:-1", "Root", "Foreground", "1agent", "a.b", strings.Repeat("a", MaxAgentName+1)} {
		err := ValidatePrincipal(bad)
		if err == nil || err.Error() != fmt.Sprintf("%q is not a principal (\"foreground\", \"uid:N\" or an agent name)", bad) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	for _, good := range []string{"alice", "a", strings.Repeat("a", MaxAgentName), "ci-bot_2"} {
		if err := ValidatePrincipal(good); err != nil {
			t.Errorf("agent name %q: %v", good, err)
		}
	}
	_, err := Parse([]byte(`{"payer": {"maxPerCall": 1, "perDay": 1, "ceiling": 3}}`))
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("an unknown payer field: %v", err)
	}
}

// TestForegroundAllowanceParse: the allowance is absent unless named; at
// its bounds (the payer's defaults, its own day) it parses; one past each
// is refused at parse with its exact line; an override naming the
// foreground is refused, so the allowance is said in one place only.
func TestForegroundAllowanceParse(t *testing.T) {
	parse := func(payer string) (*Config, error) {
		t.Helper()
		raw := agentsConfig(t, map[string]any{"uids": []uint32{}, "gids": []uint32{}})
		return Parse(append(raw[:len(raw)-1], []byte(`,"payer":`+payer+`}`)...))
	}
	c, err := parse(`{"maxPerCall": 100, "perDay": 100000}`)
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := c.ForegroundAllowance(); ok || c.Payer.Limits(PrincipalForeground) != (PayerLimits{}) {
		t.Fatalf("no allowance named: %+v %v", l, ok)
	}
	if _, ok := (&Config{}).ForegroundAllowance(); ok {
		t.Fatal("no payer policy: an allowance")
	}
	c, err = parse(`{"maxPerCall": 100, "perDay": 100000, "foregroundAllowance": {"maxPerCall": 100, "perDay": 100000}}`)
	if err != nil {
		t.Fatalf("at the bounds: %v", err)
	}
	if l, ok := c.ForegroundAllowance(); !ok || l != (PayerLimits{100, 100000}) || c.Payer.Limits(PrincipalForeground) != l {
		t.Fatalf("the allowance: %+v %v", l, ok)
	}
	for payer, want := range map[string]string{
		`{"maxPerCall": 100, "perDay": 100000, "foregroundAllowance": {"maxPerCall": 10, "perDay": 100001}}`:   "payer.foregroundAllowance.perDay: 100001 exceeds the bound of payer.perDay, 100000",
		`{"maxPerCall": 100, "perDay": 100000, "foregroundAllowance": {"maxPerCall": 101, "perDay": 1000}}`:    "payer.foregroundAllowance.maxPerCall: 101 exceeds the bound of payer.maxPerCall, 100",
		`{"maxPerCall": 100, "perDay": 100000, "foregroundAllowance": {"maxPerCall": 11, "perDay": 10}}`:       "payer.foregroundAllowance.maxPerCall: 11 exceeds its perDay, 10",
		`{"maxPerCall": 100, "perDay": 100000, "foregroundAllowance": {"maxPerCall": 1, "perDay": 1, "x": 1}}`: `json: unknown field "x"`,
		`{"maxPerCall": 100, "perDay": 100000, "principals": {"foreground": {"maxPerCall": 1, "perDay": 1}}}`:  `payer.principals: "foreground" is not an override: the foreground socket spends only within payer.foregroundAllowance`,
	} {
		_, err := parse(payer)
		if !errors.Is(err, ErrConfig) || err.Error() != "controller config refused: "+want {
			t.Errorf("%s: %v\nwant %q", payer, err, want)
		}
	}
}
