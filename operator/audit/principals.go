package audit

import (
	"fmt"
)

// Every dispatch names its principal (DESIGN.md section 5, "The operator's
// limits per agent"): a host that refuses a dispatch naming no agent never
// writes a receipt naming none for a call it admitted. Verify reports one
// written after the upgrade, which it knows per controller: after the
// first receipt of the chain that names an agent of that controller (a
// controller that names agents names one in every dispatch, so an
// agent-less receipt of it after that is a call admitted past the agents'
// limits). A receipt of an operator's resolution or redelivery (it names
// its resolver) is exempt: its attempt may have been admitted before the
// upgrade, naming no agent then. Receipts before a controller's first
// agent, and every receipt of a controller that never named one, are what
// hosts before wrote.

// principalCheck remembers, per controller, the first receipt in chain
// order that named an agent.
type principalCheck struct {
	first map[string]uint64 // controller -> that receipt's seq
}

func newPrincipalCheck() *principalCheck {
	return &principalCheck{first: map[string]uint64{}}
}

// check takes receipt c, the next in chain order, and returns the finding
// of an agent-less receipt after its controller's first agent, or "".
func (pc *principalCheck) check(c chainReceipt) string {
	r := c.r
	first, named := pc.first[r.Controller]
	switch {
	case r.Agent != "":
		if !named {
			pc.first[r.Controller] = r.Seq
		}
	case named && r.ResolvedBy == "":
		return fmt.Sprintf("receipt %d (%s): names no agent, after receipt %d named one of controller %s: the host admitted a dispatch naming no principal, past the agents' limits",
			r.Seq, c.where, first, shortField(r.Controller))
	}
	return ""
}

// pointPrincipal is one controller's first agent-naming receipt, as a
// point carries it.
type pointPrincipal struct {
	Controller string `cbor:"controller"`
	First      uint64 `cbor:"first"`
}

// state is pc as a point carries it, by controller name.
func (pc *principalCheck) state() []pointPrincipal {
	var out []pointPrincipal
	for _, name := range sortedKeys(pc.first) {
		out = append(out, pointPrincipal{Controller: name, First: pc.first[name]})
	}
	return out
}

// restorePrincipals is the check a point's state carries, refused when it
// does not hold together (a controller twice, or out of order).
func restorePrincipals(ps []pointPrincipal) (*principalCheck, error) {
	pc := newPrincipalCheck()
	for i, p := range ps {
		if _, dup := pc.first[p.Controller]; dup || p.First == 0 || (i > 0 && ps[i-1].Controller >= p.Controller) {
			return nil, fmt.Errorf("its agents' first receipts do not hold together")
		}
		pc.first[p.Controller] = p.First
	}
	return pc, nil
}

// principalFindings is the findings of check over rs, in chain order.
func principalFindings(rs []chainReceipt) []string {
	pc := newPrincipalCheck()
	var out []string
	for _, c := range rs {
		if f := pc.check(c); f != "" {
			out = append(out, f)
		}
	}
	return out
}
