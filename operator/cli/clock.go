package cli

import (
	"fmt"

	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/views"
)

// cmdClockAccept accepts the wall clock as the store's time when it reads
// behind the latest time recorded (a clock set forward, then corrected):
// through the running host's admin socket, or on the stopped store. A
// clock that is not behind is refused (exit 2).
func (c *CLI) cmdClockAccept(args []string) error {
	fs, store := flags("clock accept")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := c.parse(fs, args, 0); err != nil {
		return err
	}
	rep, err := c.admin(*store, admin.Request{Op: admin.OpClockAccept, By: views.OwnAccount()})
	if err != nil {
		return err
	}
	v := rep.Clock
	if v == nil {
		return fmt.Errorf("clock accept: the host's answer carries no clock")
	}
	if *asJSON {
		return c.printJSON(v)
	}
	fmt.Fprintf(c.Stdout, "clock accepted: the store's time is %s (it had recorded %s); counting on %s from now on, carried %d grant, %d agent and %d attempt days to it\n",
		v.At, v.Was, v.Day, v.Grants, v.Agents, v.Attempts)
	return nil
}
