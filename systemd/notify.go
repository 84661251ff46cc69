package systemd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// ErrNotify is wrapped by every error about a notification that could not be
// sent or was malformed.
var ErrNotify = errors.New("sd_notify")

// Notify sends one notification made of the given KEY=VALUE lines to the
// service manager's NOTIFY_SOCKET (sd_notify(3)). Without NOTIFY_SOCKET the
// process is not run by systemd (a test, steward-dev), nobody is waiting for
// the message, and Notify returns nil. NOTIFY_SOCKET stays set: the watchdog
// keeps using it.
func Notify(lines ...string) error {
	if len(lines) == 0 {
		return fmt.Errorf("%w: no state to send", ErrNotify)
	}
	for _, l := range lines {
		k, _, ok := strings.Cut(l, "=")
		if !ok || k == "" || strings.ContainsAny(l, "\n\x00") {
			return fmt.Errorf("%w: %q is not one KEY=VALUE line", ErrNotify, l)
		}
	}
	msg := strings.Join(lines, "\n")
	if _, err := daemon.SdNotify(false, msg); err != nil {
		return fmt.Errorf("%w: send %q to %s: %w", ErrNotify, msg, os.Getenv("NOTIFY_SOCKET"), err)
	}
	return nil
}

// Ready tells systemd the daemon is ready (READY=1), with any extra
// KEY=VALUE lines such as "STATUS=serving 3 routes" in the same message.
// A daemon calls it only after its journal is open and its sockets are
// bound: Type=notify units count as started from this message on.
func Ready(extra ...string) error {
	return Notify(append([]string{daemon.SdNotifyReady}, extra...)...)
}

// Stopping tells systemd the daemon has begun to shut down (STOPPING=1).
func Stopping() error {
	return Notify(daemon.SdNotifyStopping)
}

// StartWatchdog starts pinging systemd's watchdog (WATCHDOG=1) at half of
// the interval systemd set in WATCHDOG_USEC, until ctx is done. Before each
// ping it calls check, if not nil: while check returns an error the ping is
// skipped and the error logged, so that systemd restarts a daemon whose
// service loop is stuck instead of one whose ticker merely still runs.
// A ping that cannot be sent is logged too.
//
// It returns the watchdog interval, or 0 when systemd asked for no watchdog
// (WATCHDOG_USEC unset, or set for another pid); it returns an error when
// WATCHDOG_USEC is malformed or set without NOTIFY_SOCKET.
func StartWatchdog(ctx context.Context, check func() error) (time.Duration, error) {
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		return 0, fmt.Errorf("%w: watchdog: %w", ErrNotify, err)
	}
	if interval == 0 {
		return 0, nil
	}
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return 0, fmt.Errorf("%w: watchdog: WATCHDOG_USEC is set but NOTIFY_SOCKET is not", ErrNotify)
	}
	go func() {
		t := time.NewTicker(interval / 2)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if check != nil {
				if err := check(); err != nil {
					slog.Error("watchdog: health check failed, not pinging", "err", err)
					continue
				}
			}
			if err := Notify(daemon.SdNotifyWatchdog); err != nil {
				slog.Error("watchdog: ping failed", "err", err)
			}
		}
	}()
	return interval, nil
}
