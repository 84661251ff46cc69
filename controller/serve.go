package controller

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire"
)

// Options tune Serve.
type Options struct {
	// Ready is called once the journal is open and every socket is bound
	// (the daemon's Type=notify readiness).
	Ready func()
	// Logger receives the daemon's log; nil means slog.Default().
	Logger *slog.Logger
	// Listeners are sockets already bound and listening, passed by systemd
	// socket activation, keyed ListenerForeground and ListenerMCP. Each one
	// present must be bound at the config's path for it and is served with
	// the same peer check, refusal and caps as a socket Serve binds itself;
	// the absent ones Serve binds. A passed reverse or advisor listener is
	// refused (errAdoptedReverse, errAdoptedAdvisor): Serve always binds
	// those itself.
	// Serve closes them all when it returns.
	Listeners map[string]*net.UnixListener
	// Watchdog, if set, is called once after Ready with a check that says
	// why the controller can no longer serve (its journal failed), or nil:
	// the cmd main feeds systemd's watchdog with it.
	Watchdog func(health func() error)
	// JournalSegmentSize is the segment size of a journal Serve creates,
	// which the journal records and keeps (journal.Options.SegmentSize);
	// the journal's default when 0.
	JournalSegmentSize int64
	// Now is the wall clock, the daemon's only source of time (the payer's
	// day, a consent's time, a grant's validity); nil is time.Now. Tests
	// inject one to set the clock back.
	Now func() time.Time
	// SnapshotEvery is how many journal records a snapshot of the ledger
	// is made after (history.DefaultEvery when 0): the most the live
	// ledger holds of what ended beyond what is under way, and the most a
	// start replays.
	SnapshotEvery uint64
	// hooks let the package's tests watch the history (nil outside them).
	hooks *historyHooks
	// settled, in the package's tests, is set to what waits for the result
	// records being journaled after their answers (resultwrite.go), so a
	// test reads the journal once they are on disk.
	settled *func()
	// opened, in the package's tests, is given the controller once open.
	opened func(*Controller)
	// FirstRequestTimeout is how long a connection on the MCP or the
	// foreground socket has to send its first request (and a foreground
	// connection its next one) before it is answered and closed;
	// DefaultFirstRequestTimeout when 0. Tests shorten it.
	FirstRequestTimeout time.Duration
}

// DefaultFirstRequestTimeout bounds a new connection's first request on the
// MCP and foreground sockets: the frame sockets' handshake bound, since a
// local client that connects sends at once, and a peer that connects and
// says nothing must not hold a slot for longer.
const DefaultFirstRequestTimeout = wire.DefaultHandshakeTimeout

// Serve runs the controller daemon with the config at cfgPath until ctx
// ends: it opens the journal (refusing a config whose binding differs),
// lists the uncertain attempts it finds, binds the reverse, MCP and
// foreground sockets (and the streamable HTTP and advisor ones when the
// config names them), calls Ready, and serves. Nothing is retried.
func Serve(ctx context.Context, cfgPath string, opts Options) error {
	defer closeListeners(opts.Listeners)
	c, err := open(cfgPath, opts.Logger, historyOpts{segmentSize: opts.JournalSegmentSize, every: opts.SnapshotEvery, hooks: opts.hooks}, opts.Now)
	if err != nil {
		return err
	}
	defer c.Close()
	if opts.settled != nil {
		*opts.settled = c.writes.drain
	}
	if opts.opened != nil {
		opts.opened(c)
	}
	c.firstRequest = opts.FirstRequestTimeout
	if c.firstRequest <= 0 {
		c.firstRequest = DefaultFirstRequestTimeout
	}
	if err := checkAdopted(opts.Listeners, c.cfg.Sockets); err != nil {
		return err
	}
	// Cancelled when the journal stops, too: the servers end as at a signal.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, a := range c.led.UncertainAttempts() {
		c.log.Warn("uncertain attempt found at start: inspect it with `steward-controller attempts inspect`",
			"attempt", a.ID, "tool", a.Tool, "application", a.Application, "requestId", a.RequestID, "detail", a.Detail)
	}

	var lns []*wire.Listener
	closeAll := func() {
		for _, l := range lns {
			l.Close()
		}
	}
	rev, err := c.listenReverse()
	if err != nil {
		return err
	}
	lns = append(lns, rev)
	mcpLn, err := c.listenMCP(opts.Listeners[ListenerMCP])
	if err != nil {
		closeAll()
		return err
	}
	lns = append(lns, mcpLn)
	fg, err := c.listenForeground(opts.Listeners[ListenerForeground])
	if err != nil {
		closeAll()
		return err
	}
	lns = append(lns, fg)
	var mcpHTTPLn *wire.Listener
	if c.cfg.Sockets.MCPHTTP != "" {
		if mcpHTTPLn, err = c.listenMCPHTTP(); err != nil {
			closeAll()
			return err
		}
		lns = append(lns, mcpHTTPLn)
	}
	var advisorLn *wire.Listener
	if c.cfg.Sockets.Advisor != "" {
		if advisorLn, err = c.listenAdvisor(); err != nil {
			closeAll()
			return err
		}
		lns = append(lns, advisorLn)
	}

	keeperDone := c.runKeeper(ctx, opts.hooks)
	defer func() { cancel(); <-keeperDone }()
	// The route table pushed; it ends before the control channel closes.
	defer c.startRouteWatch(ctx, cancel)()

	var wg sync.WaitGroup
	srv := c.newMCPServer()
	wg.Go(func() { c.serveReverse(ctx, rev) })
	wg.Go(func() { c.serveMCP(ctx, mcpLn, srv) })
	wg.Go(func() { c.serveForeground(ctx, fg) })
	if mcpHTTPLn != nil {
		wg.Go(func() { c.serveMCPHTTP(ctx, mcpHTTPLn, srv) })
	}
	if advisorLn != nil {
		wg.Go(func() { c.serveAdvisor(ctx, advisorLn) })
	}
	c.log.Info("controller ready", "name", c.cfg.Name, "journal", c.cfg.JournalDir(), "lastSeq", c.j.LastSeq())
	if opts.Ready != nil {
		opts.Ready()
	}
	if opts.Watchdog != nil {
		opts.Watchdog(c.health)
	}
	failed := c.waitStop(ctx, keeperDone)
	cancel()
	closeAll()
	wg.Wait()
	c.log.Info("controller stopped")
	return failed
}

// runKeeper makes the next snapshot in the background until ctx ends;
// after each, the ledger drops the requestIds the synced index now holds.
// The channel has Run's result.
func (c *Controller) runKeeper(ctx context.Context, hooks *historyHooks) chan error {
	done := make(chan error, 1)
	go func() {
		done <- c.hist.keeper.Run(ctx, time.Second, func(m journal.Mark) {
			n := c.led.Forget(m.Seq)
			c.log.Debug("controller history: snapshot made; ended requestIds left memory", "seq", m.Seq, "forgotten", n)
			if hooks != nil && hooks.snapshotted != nil {
				hooks.snapshotted(m, n)
			}
		})
	}()
	return done
}

// waitStop waits until ctx ends, the journal stops for good or the
// history keeper stops, and returns why the daemon must exit non-zero
// (nil for ctx). keeperDone is the keeper's Run; a value taken from it is
// put back for the deferred wait on it.
func (c *Controller) waitStop(ctx context.Context, keeperDone chan error) error {
	var failed error
	select {
	case <-ctx.Done():
	case <-c.j.Failed():
		// What is on disk is unknown: exit non-zero, so that systemd
		// restarts the controller and it reopens the journal from disk.
		failed = fmt.Errorf("journal stopped for good (%s); exiting so that a restart reopens it from disk", c.j.Summary().Failure)
		c.log.Error("steward-controller: " + failed.Error())
	case <-c.hist.watch.stopped():
		// Every lookup, and so every call, would fail from now on (a
		// failed write, on a full disk, stops the index until it is
		// reopened). Exit non-zero, so that a restart reopens it (sets
		// a damaged one aside) and replays the journal into it.
		failed = fmt.Errorf("history index stopped for good (%v); exiting so that a restart reopens it", c.hist.watch.Err())
		c.log.Error("steward-controller: " + failed.Error())
	case err := <-keeperDone:
		// The keeper stopped making snapshots (its replica refused a
		// record, or the index failed): the live ledger would keep every
		// requestId from now on, and an index that failed answers no
		// lookup. Exit non-zero, so that a restart reopens the index and
		// replays the journal into it. (Run returns nil when ctx ends: a
		// stop, whichever case the select took.)
		keeperDone <- err
		if err == nil {
			return nil
		}
		failed = fmt.Errorf("history stopped for good (%v); exiting so that a restart rebuilds it from the journal", err)
		c.log.Error("steward-controller: " + failed.Error())
	}
	return failed
}
