package cli

import (
	"context"
	"log/slog"
	"os/signal"
	"syscall"

	"github.com/stewardrt/steward/operator/host"
)

func (c *CLI) cmdServe(args []string) error {
	fs, store := flags("serve")
	approvals := fs.String("approvals-socket", "", "bind the approvals socket at `PATH` for the members of --approvers-group")
	approvers := fs.String("approvers-group", "", "the `GROUP` whose members may list and answer asks on --approvals-socket")
	if _, err := c.parse(fs, args, 0); err != nil {
		return err
	}
	if err := needStore(*store); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(c.Stderr, nil))
	return host.Serve(ctx, *store, host.ServeOptions{
		Logger: log, ApprovalsSocket: *approvals, ApproversGroup: *approvers,
		Ready: func() {
			if c.Ready == nil {
				return
			}
			if err := c.Ready("STATUS=serving"); err != nil {
				log.Warn("steward-operator: sd_notify READY", "err", err)
			}
		},
		// The unit sets WatchdogSec=: without pings systemd kills the
		// host, and with a failed journal the pings stop so that it does.
		Watchdog: func(health func() error) {
			if c.Watchdog != nil {
				if _, err := c.Watchdog(ctx, health); err != nil {
					log.Warn("steward-operator: sd_notify watchdog", "err", err)
				}
			}
			if c.Stopping != nil {
				context.AfterFunc(ctx, func() { c.Stopping() })
			}
		},
	})
}
