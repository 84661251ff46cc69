package controller

import (
	"context"
	"log/slog"
	"sync"

	"github.com/stewardrt/steward/wire"
)

// Options tune Serve.
type Options struct {
	// Ready is called once the journal is open and every socket is bound
	// (the daemon's Type=notify readiness).
	Ready func()
	// Logger receives the daemon's log; nil means slog.Default().
	Logger *slog.Logger
}

// Serve runs the controller daemon with the config at cfgPath until ctx
// ends: it opens the journal (refusing a config whose binding differs),
// lists the uncertain attempts it finds, binds the reverse, MCP and
// foreground sockets, calls Ready, and serves. Nothing is retried.
func Serve(ctx context.Context, cfgPath string, opts Options) error {
	c, err := open(cfgPath, opts.Logger)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, a := range c.led.uncertain() {
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
	mcpLn, err := c.listenMCP()
	if err != nil {
		closeAll()
		return err
	}
	lns = append(lns, mcpLn)
	fg, err := c.listenForeground()
	if err != nil {
		closeAll()
		return err
	}
	lns = append(lns, fg)

	var wg sync.WaitGroup
	srv := c.newMCPServer()
	wg.Go(func() { c.serveReverse(ctx, rev) })
	wg.Go(func() { c.serveMCP(ctx, mcpLn, srv) })
	wg.Go(func() { c.serveForeground(ctx, fg) })
	c.log.Info("controller ready", "name", c.cfg.Name, "journal", c.cfg.JournalDir(), "lastSeq", c.j.LastSeq())
	if opts.Ready != nil {
		opts.Ready()
	}
	<-ctx.Done()
	closeAll()
	wg.Wait()
	c.log.Info("controller stopped")
	return nil
}
