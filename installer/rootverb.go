package installer

// rootInput is the start of every root-only verb (controller-config,
// controller-enroll, controller-pin-host): these change what the payer
// trusts or pays, so none is in the sudo column, and each refuses a
// non-root euid. It returns whose private file the verb reads: root's, or
// the invoking account's (SUDO_UID) when root ran the verb through its own
// sudo. ok false means the refusal is printed and exit is its status.
func (c *call) rootInput() (owner uint32, exit int, ok bool) {
	if c.env.EUID != 0 && c.env.Controller.Account != "" {
		return 0, c.failf("must run as root (euid is %d): this verb changes the payer's side, which the operator's sudo cannot reach", c.env.EUID), false
	}
	owner = uint32(c.env.EUID)
	if c.env.SudoUID != "" {
		u, err := c.env.InvokingUID()
		if err != nil {
			return 0, c.refusef("%v", err), false
		}
		owner = u
	}
	return owner, ExitOK, true
}
