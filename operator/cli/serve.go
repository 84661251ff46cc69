package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os/signal"
	"syscall"

	"github.com/stewardrt/steward/journal/history"
	"github.com/stewardrt/steward/operator/host"
	"github.com/stewardrt/steward/operator/views"
)

func (c *CLI) cmdServe(args []string) error {
	fs, store := flags("serve")
	approvals := fs.String("approvals-socket", "", "bind the approvals socket at `PATH` for the members of --approvers-group")
	approvers := fs.String("approvers-group", "", "the `GROUP` whose members may list and answer asks on --approvals-socket")
	every := fs.Uint64("snapshot-every", history.DefaultEvery, "make a snapshot of the host's state after every `N` journal records")
	perAgent := fs.Int("pending-asks-per-agent", views.DefaultPendingAsksPerAgent, "at most `N` asks of one agent pending at once (a call needing approval past it is refused)")
	perCtrl := fs.Int("pending-asks-per-controller", views.DefaultPendingAsksPerController, "at most `N` asks of one controller's agents pending at once")
	askBytes := fs.Int64("pending-ask-bytes", views.DefaultPendingAskBytesPerController, "at most `BYTES` of calls in one controller's pending asks together")
	if _, err := c.parse(fs, args, 0); err != nil {
		return err
	}
	if *perAgent < 1 || *perCtrl < 1 || *askBytes < 1 {
		return fmt.Errorf("%w: --pending-asks-per-agent, --pending-asks-per-controller and --pending-ask-bytes are at least 1", errUsage)
	}
	if *every == 0 {
		return fmt.Errorf("%w: --snapshot-every 0: a snapshot is made after at least one record", errUsage)
	}
	if err := needStore(*store); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(c.Stderr, nil))
	return host.Serve(ctx, *store, host.ServeOptions{
		Logger: log, ApprovalsSocket: *approvals, ApproversGroup: *approvers, SnapshotEvery: *every,
		AskBounds: views.AskBounds{PerAgent: *perAgent, PerController: *perCtrl, BytesPerController: *askBytes},
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
