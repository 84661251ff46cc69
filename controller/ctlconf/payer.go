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
//
// The foreground principal (the operator account's controller-tool, and
// anyone else the foreground socket admits) never takes these defaults:
// it spends only within ForegroundAllowance, and nothing without one,
// because the operator account is the host's side and must not be able to
// draw the payer's budget on its own (DESIGN.md section 5, "The
// foreground allowance").
type Payer struct {
	MaxPerCall uint64                 `json:"maxPerCall"` // the most one call may be charged
	PerDay     uint64                 `json:"perDay"`     // the most one principal's calls may be charged in a UTC day
	Principals map[string]PayerLimits `json:"principals,omitempty"`
	// ForegroundAllowance is what calls on the foreground socket may
	// spend; absent, none: a foreground oracle_call is refused before it
	// is journaled. Omitted when absent, so a config from before it binds
	// the same.
	ForegroundAllowance *PayerLimits `json:"foregroundAllowance,omitempty"`
}

// PayerLimits are the limits of one principal.
type PayerLimits struct {
	MaxPerCall uint64 `json:"maxPerCall"`
	PerDay     uint64 `json:"perDay"`
}

// Limits returns the limits that apply to principal: for the foreground
// principal its allowance (zero without one), never the defaults.
func (p *Payer) Limits(principal string) PayerLimits {
	if principal == PrincipalForeground {
		if p.ForegroundAllowance == nil {
			return PayerLimits{}
		}
		return *p.ForegroundAllowance
	}
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
		if name == PrincipalForeground {
			return errors.New(`payer.principals: "foreground" is not an override: the foreground socket spends only within payer.foregroundAllowance`)
		}
		if err := ValidatePrincipal(name); err != nil {
			return fmt.Errorf("payer.principals: %w", err)
		}
	}
	return p.validateForeground()
}

// validateForeground bounds the foreground allowance by the payer's own
// defaults: the operator account is one account, so it may be allowed at
// most what every agent gets without an override, and a per-call ceiling
// above its day could never be spent.
func (p *Payer) validateForeground() error {
	a := p.ForegroundAllowance
	switch {
	case a == nil:
		return nil
	case a.MaxPerCall > p.MaxPerCall:
		return fmt.Errorf("payer.foregroundAllowance.maxPerCall: %d exceeds the bound of payer.maxPerCall, %d", a.MaxPerCall, p.MaxPerCall)
	case a.PerDay > p.PerDay:
		return fmt.Errorf("payer.foregroundAllowance.perDay: %d exceeds the bound of payer.perDay, %d", a.PerDay, p.PerDay)
	case a.MaxPerCall > a.PerDay:
		return fmt.Errorf("payer.foregroundAllowance.maxPerCall: %d exceeds its perDay, %d", a.MaxPerCall, a.PerDay)
	}
	return nil
}

// ForegroundAllowance returns the foreground principal's allowance, and
// whether the config names one (a payer policy with foregroundAllowance).
func (c *Config) ForegroundAllowance() (PayerLimits, bool) {
	if c.Payer == nil || c.Payer.ForegroundAllowance == nil {
		return PayerLimits{}, false
	}
	return *c.Payer.ForegroundAllowance, true
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

// ErrNoForegroundAllowance refuses a foreground call that could charge
// (an oracle_call, or a priced discovery) when the config names no
// foreground allowance. It says how root grants one.
var ErrNoForegroundAllowance = errors.New("the operator account has no allowance: the foreground socket spends no credits unless root grants payer.foregroundAllowance {maxPerCall, perDay} in the controller's config (steward-installer controller-config, then controller-enroll and a restart)")

// ErrNoPayerPolicy is the refusal of a charge when the config has no
// payer policy.
var ErrNoPayerPolicy = errors.New("the controller's config has no payer policy (payer: {maxPerCall, perDay}), so it consents to no charge")
