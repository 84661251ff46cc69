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
	if l := p.Limits(PrincipalForeground); l != (PayerLimits{5, 20}) {
		t.Fatalf("default: %+v", l)
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
