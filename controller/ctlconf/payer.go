package ctlconf

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxPayerPrincipals bounds the per-principal overrides of a payer policy
// (DESIGN.md section 8).
const MaxPayerPrincipals = 256

// PrincipalForeground is the principal of every call made on the
// foreground socket (steward-installer controller-tool and the like).
const PrincipalForeground = "foreground"

// UIDPrincipal is the principal of a call made on the MCP socket by a peer
// with this uid (SO_PEERCRED) that agents.uids or agents.gids admits, not a
// named agent: "uid:N".
func UIDPrincipal(uid uint32) string { return "uid:" + strconv.FormatUint(uint64(uid), 10) }

// Payer is the controller's own word on what it pays: the limits it
// consents within, whatever the host asks. They apply to each principal
// separately; Principals overrides them for the principals it names.
// Without a payer policy the controller consents to no charge at all.
type Payer struct {
	MaxPerCall uint64                 `json:"maxPerCall"` // the most one call may be charged
	PerDay     uint64                 `json:"perDay"`     // the most one principal's calls may be charged in a UTC day
	Principals map[string]PayerLimits `json:"principals,omitempty"`
}

// PayerLimits are the limits of one principal.
type PayerLimits struct {
	MaxPerCall uint64 `json:"maxPerCall"`
	PerDay     uint64 `json:"perDay"`
}

// Limits returns the limits that apply to principal.
func (p *Payer) Limits(principal string) PayerLimits {
	if l, ok := p.Principals[principal]; ok {
		return l
	}
	return PayerLimits{MaxPerCall: p.MaxPerCall, PerDay: p.PerDay}
}

func (p *Payer) validate() error {
	if n := len(p.Principals); n > MaxPayerPrincipals {
		return fmt.Errorf("payer.principals: %d principals exceeds the bound of %d", n, MaxPayerPrincipals)
	}
	for name := range p.Principals {
		if err := ValidatePrincipal(name); err != nil {
			return fmt.Errorf("payer.principals: %w", err)
		}
	}
	return nil
}

// ValidatePrincipal checks a principal's name: "foreground", "uid:N" with
// N a uid in canonical decimal (a peer the legacy agents.uids or gids
// admit), or an agent's name (ValidateAgentName). Whether a named agent is
// configured is not checked: an account may leave a group between starts,
// and a policy naming it then limits nobody.
func ValidatePrincipal(s string) error {
	if s == PrincipalForeground || ValidateAgentName(s) == nil {
		return nil
	}
	n, ok := strings.CutPrefix(s, "uid:")
	if ok {
		if u, err := strconv.ParseUint(n, 10, 32); err == nil && UIDPrincipal(uint32(u)) == s {
			return nil
		}
	}
	return fmt.Errorf("%q is not a principal (%q, \"uid:N\" or an agent name)", s, PrincipalForeground)
}

// ErrNoPayerPolicy is the refusal of a charge when the config has no
// payer policy.
var ErrNoPayerPolicy = errors.New("the controller's config has no payer policy (payer: {maxPerCall, perDay}), so it consents to no charge")
