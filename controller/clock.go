package controller

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/stewardrt/steward/controller/foreground"
	"github.com/stewardrt/steward/controller/ledger"
)

// foregroundClockAccept is the running daemon's clock accept request.
var foregroundClockAccept = foreground.Request{Op: foreground.OpClockAccept}

// The payer's day never goes back (payer.today): a clock set back refills
// no budget. A clock set forward and then corrected would leave every
// call counting against the far-future day until real time caught up, so
// `steward-controller clock accept` is the operator's word that the wall
// clock is right (DESIGN.md section 5, "A clock set forward"): a
// clock-accept record, replayed, sets the payer's day back to the wall
// clock's, what was spent on the forward day carried to it.

// ClockReport is what `clock accept` did: the day the payer counts on
// from now (Day) and the day it had recorded (Was), both YYYY-MM-DD UTC.
type ClockReport struct {
	Day string `json:"day"`
	Was string `json:"was"`
}

// AcceptClock journals a clock accept when the wall clock's UTC day is
// behind the payer's day, and applies it; a clock not behind is refused
// and nothing is journaled.
func (c *Controller) AcceptClock() (ClockReport, error) {
	d, was := utcDay(c.now()), c.pay.latestDay()
	if d >= was {
		return ClockReport{}, refusedf("the wall clock's UTC day (%s) is not behind the latest day the controller recorded (%s): there is nothing to accept, and nothing was recorded",
			dayString(d), dayString(was))
	}
	rec := ledger.ClockAccept{Day: d, Was: was}
	if _, err := c.j.Append(ledger.KindClockAccept, rec); err != nil {
		return ClockReport{}, err
	}
	c.led.ClockAccepted(rec)
	c.pay.accept(d)
	c.log.Warn("the wall clock was accepted behind the latest day recorded; the day's spending carries to its day",
		"day", dayString(d), "was", dayString(was))
	return ClockReport{Day: dayString(d), Was: dayString(was)}, nil
}

// latestDay is the payer's day.
func (p *payer) latestDay() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.day
}

// accept moves the payer's day back to day: its spending carries (nothing
// refills), and a consent held for a later day counts on day, so its
// settlement still replaces what it held.
func (p *payer) accept(day int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.day, p.behind = day, false
	for _, h := range p.holds {
		if h.day > day {
			h.day = day
		}
	}
}

// AcceptClockAt runs `clock accept` for the controller of the config at
// cfgPath: through the running daemon's foreground socket, else on the
// stopped state here.
func AcceptClockAt(ctx context.Context, cfgPath string, log *slog.Logger) (ClockReport, error) {
	var rep ClockReport
	err := historyOp(ctx, cfgPath, log, foregroundClockAccept, &rep, func(c *Controller) (any, error) { return c.AcceptClock() })
	return rep, err
}

// clock runs `clock accept`.
func (c *CLI) clock(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "accept" {
		return fmt.Errorf("%w: clock accept --config FILE", errUsage)
	}
	fs := newFlags("clock accept")
	cfg := fs.String("config", "", "the controller config (JSON)")
	if err := c.parse(fs, args[1:], 0); err != nil {
		return err
	}
	rep, err := AcceptClockAt(ctx, *cfg, c.logger())
	if err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "clock accepted: the payer counts on %s from now on (it had recorded %s); that day's spending carries to it\n", rep.Day, rep.Was)
	return nil
}
