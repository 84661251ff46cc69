package cli

import (
	"fmt"

	"github.com/stewardrt/steward/operator/admin"
)

// cmdHistorySnapshot makes a snapshot of the store's state now, through
// the running host when it runs: the next start replays only what
// follows it, and an archive may take the segments before it.
func (c *CLI) cmdHistorySnapshot(args []string) error {
	fs, store := flags("history snapshot")
	if _, err := c.parse(fs, args, 0); err != nil {
		return err
	}
	rep, err := c.admin(*store, admin.Request{Op: admin.OpHistorySnapshot})
	if err != nil {
		return err
	}
	if rep.Snapshot == "" {
		fmt.Fprintln(c.Stdout, "nothing recorded since the last snapshot: none written")
		return nil
	}
	fmt.Fprintln(c.Stdout, "snapshot", rep.Snapshot)
	return nil
}
