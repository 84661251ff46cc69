package histbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/stewardrt/steward/dev"
	"github.com/stewardrt/steward/operator/admin"
)

// GenOptions configure Generate.
type GenOptions struct {
	// Dir is GEN: the state is made at GEN/state, each point copied to
	// GEN/points/N, what was made said in GEN/meta.json. A GEN whose
	// meta.json has every point is reused as it is.
	Dir string
	// Appliance is the steward-appliance binary.
	Appliance string
	// Self is the histgen binary, whose daemon modes run the host and the
	// controller; the running executable when empty.
	Self string
	// Points are the numbers of bulk calls at which the state is kept,
	// ascending; the last is how many are made. 0, the state as the dev
	// mode provisions it, is always kept.
	Points []int
	// Clients is the number of concurrent MCP sessions (default 32).
	Clients int
	// DayCalls is how many bulk calls the daemons' clock counts as one day
	// (default 50,000, and at most half the calls, so that one step and
	// its episodes come before the end).
	DayCalls int
	// Log receives one line per step.
	Log io.Writer
}

// generator is one run of Generate.
type generator struct {
	opts    GenOptions
	s       *stack
	uid     uint32
	meta    *Meta
	tally   tally
	callers []*caller
	ep      *caller // the episodes' own session
	resp    *responder
	fail    context.CancelCauseFunc // ends the generation's context: the responder's failure
	cursor  uint64                  // of the ask events answered
	episode int                     // episodes run
	epSeq   int
	// expiring is the call whose ask expireRaised left to expire.
	expiring map[string]any
	began    time.Time
	done     int // bulk calls made
	from     int // bulk calls made when the stack last started
}

// Generate makes (or reuses) the generation in opts.Dir and returns what
// it made.
func Generate(ctx context.Context, opts GenOptions) (*Meta, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	g := &generator{opts: opts, uid: uint32(os.Getuid()), meta: newMeta(opts)}
	run := g.run
	if m, err := ReadMeta(opts.Dir); err == nil {
		switch {
		case m.has(opts.Points):
			fmt.Fprintf(opts.Log, "histgen: reusing the generation in %s (points %v)\n", opts.Dir, m.pointCalls())
			return m, nil
		case !m.extends(opts.Points):
			return nil, fmt.Errorf("%s holds a generation of points %v, which %v does not extend: remove it or use another directory",
				opts.Dir, m.pointCalls(), opts.Points)
		}
		g.meta, run = m, g.resume
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	} else if ents, _ := os.ReadDir(opts.Dir); len(ents) > 0 {
		return nil, fmt.Errorf("%s is not empty and has no meta.json: remove it or use another directory", opts.Dir)
	}
	ctx, g.fail = context.WithCancelCause(ctx)
	defer g.fail(nil)
	err := run(ctx)
	if g.resp != nil {
		_, rerr := g.resp.stop()
		err = errors.Join(err, rerr)
	}
	if g.s != nil {
		err = errors.Join(err, g.s.stop())
	}
	if err != nil {
		return nil, err
	}
	return g.meta, g.meta.write(opts.Dir)
}

func (o *GenOptions) fill() error {
	if o.Dir == "" || o.Appliance == "" || len(o.Points) == 0 {
		return errors.New("histgen: a directory, the steward-appliance binary and the points are needed")
	}
	abs, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	o.Dir = abs
	if o.Self == "" {
		if o.Self, err = os.Executable(); err != nil {
			return err
		}
	}
	o.Points = slices.Compact(slices.Sorted(slices.Values(append([]int{0}, o.Points...))))
	n := o.Points[len(o.Points)-1]
	if o.Points[0] < 0 || n < 2 {
		return fmt.Errorf("histgen: points %v: at least 2 calls, none negative", o.Points)
	}
	if o.Clients <= 0 {
		o.Clients = 32
	}
	if o.DayCalls <= 0 {
		o.DayCalls = 50_000
	}
	o.DayCalls = min(o.DayCalls, (n+1)/2)
	if o.Log == nil {
		o.Log = io.Discard
	}
	return nil
}

// run provisions, keeps point 0, makes the oldest call, runs the first
// episodes, then the bulk calls day by day, keeping each point.
func (g *generator) run(ctx context.Context) error {
	g.began = time.Now()
	state := filepath.Join(g.opts.Dir, "state")
	l, err := provision(ctx, state, io.Discard)
	if err != nil {
		return err
	}
	logDir := filepath.Join(g.opts.Dir, "logs")
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return err
	}
	g.meta.State, g.meta.UID = l.State, g.uid
	g.s = &stack{l: l, self: g.opts.Self, appBin: g.opts.Appliance, logDir: logDir}
	if err := g.keep(0); err != nil {
		return err
	}
	if err := g.up(ctx); err != nil {
		return err
	}
	n := g.opts.Points[len(g.opts.Points)-1]
	if err := g.setup(ctx, n); err != nil {
		return err
	}
	if err := g.oldest(ctx); err != nil {
		return err
	}
	if err := g.dayEnd(ctx, true); err != nil {
		return err
	}
	g.done = 1
	return g.bulk(ctx, n)
}

// resume goes on from the last point of a generation to the points after
// it, as if it had not stopped there: the same days and clock, the next
// requestIds.
func (g *generator) resume(ctx context.Context) error {
	m := g.meta
	last := m.Points[len(m.Points)-1]
	g.began = time.Now().Add(-time.Duration(last.Elapsed * float64(time.Second)))
	g.opts.DayCalls, g.done, g.episode = m.DayCalls, last.Calls, m.Days
	g.tally.n = m.Outcomes
	l, err := dev.NewLayout(m.State)
	if err != nil {
		return err
	}
	if err := restore(filepath.Join(g.opts.Dir, "points", strconv.Itoa(last.Calls)), l.State); err != nil {
		return err
	}
	g.s = &stack{l: l, self: g.opts.Self, appBin: g.opts.Appliance, logDir: filepath.Join(g.opts.Dir, "logs"), offsetMs: m.OffsetMs}
	if err := g.up(ctx); err != nil {
		return err
	}
	n := g.opts.Points[len(g.opts.Points)-1]
	if _, err := g.s.admin(ctx, admin.Request{Op: admin.OpPurseFund, Name: dev.ControllerName, Amount: uint64(n-g.done) * 2}); err != nil {
		return err
	}
	fmt.Fprintf(g.opts.Log, "histgen: going on from point %d in %s\n", g.done, g.opts.Dir)
	// The last point was the end of the run that kept it: a day that ended
	// there was not stepped.
	if g.done%g.opts.DayCalls == 0 {
		if err := g.dayEnd(ctx, false); err != nil {
			return err
		}
	}
	return g.bulk(ctx, n)
}

// bulk makes calls g.done+1..n, with a day's end after every DayCalls
// and a point kept at each of opts.Points.
func (g *generator) bulk(ctx context.Context, n int) error {
	for g.done < n {
		done := g.done
		to := min(n, (done/g.opts.DayCalls+1)*g.opts.DayCalls)
		for _, p := range g.opts.Points {
			if p > done && p < to {
				to = p
			}
		}
		t0 := time.Now()
		if err := runBulk(ctx, g.callers, done+1, to, &g.tally); err != nil {
			return err
		}
		rate := float64(to-done) / time.Since(t0).Seconds()
		done, g.done = to, to
		if err := g.sample(rate); err != nil {
			return err
		}
		fmt.Fprintf(g.opts.Log, "histgen: %d calls, %.0f calls/s (day %d)\n", done, rate, g.meta.Days+1)
		if slices.Contains(g.opts.Points, done) {
			if err := g.point(ctx, done, done == n); err != nil {
				return err
			}
		}
		if done%g.opts.DayCalls == 0 && done < n {
			if err := g.dayEnd(ctx, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// setup funds the purse for n calls beyond what the dev mode funded and
// gives the MCP agent its limits (markedOp asks for approval).
func (g *generator) setup(ctx context.Context, n int) error {
	if _, err := g.s.admin(ctx, admin.Request{Op: admin.OpPurseFund, Name: dev.ControllerName, Amount: uint64(n) * 2}); err != nil {
		return err
	}
	_, err := g.s.admin(ctx, admin.Request{Op: admin.OpAgentSet, Agent: agentSpec(g.uid)})
	return err
}

// oldest makes call 1 alone, so that it is the first record of every
// journal, and keeps its arguments and answer.
func (g *generator) oldest(ctx context.Context) error {
	k := bulk(1)
	o, raw, err := g.ep.do(ctx, k)
	if err != nil {
		return err
	}
	if o.Outcome != "definite" || o.Status != 200 {
		return fmt.Errorf("the oldest call ended %s %d: %.300s", o.Outcome, o.Status, raw)
	}
	g.tally.add(k.kind, o)
	g.meta.Oldest = OldestCall{Tool: k.tool, Args: k.args, Result: raw, Attempt: o.AttemptID, Receipt: o.ReceiptID}
	return nil
}

// dayEnd runs the episodes (all of them the first time, those that do
// not restart the appliance after), raises an ask to expire, steps the
// clock a day and lets the ask expire.
func (g *generator) dayEnd(ctx context.Context, first bool) error {
	var err error
	if first {
		err = g.episodes(ctx)
	} else {
		err = g.lightEpisodes(ctx)
	}
	if err == nil {
		err = g.expireRaised(ctx)
	}
	if err == nil {
		err = g.s.step()
		g.meta.Days++
		g.meta.OffsetMs = g.s.offsetMs
	}
	if err == nil {
		err = g.expireCollect(ctx)
	}
	return err
}

// lightEpisodes are the episodes that leave the daemons running.
func (g *generator) lightEpisodes(ctx context.Context) error {
	g.episode++
	for _, run := range []func(context.Context) error{g.epFreeze, g.epRoute, g.epGrant, g.epAgentLimits} {
		if err := run(ctx); err != nil {
			return fmt.Errorf("episode %d: %w", g.episode, err)
		}
	}
	return nil
}

// up starts the stack, the responder and the sessions.
func (g *generator) up(ctx context.Context) error {
	if err := g.s.start(); err != nil {
		return err
	}
	g.from = g.done
	var err error
	if g.resp, err = startResponder(ctx, g.s, g.cursor, g.fail); err != nil {
		return err
	}
	g.callers = nil
	for range g.opts.Clients + 1 {
		m, err := dialMCP(ctx, g.s.l.MCPSocket)
		if err != nil {
			return err
		}
		g.callers = append(g.callers, &caller{mcp: m, fg: g.s.l.ForegroundSocket, uid: g.uid})
	}
	g.ep, g.callers = g.callers[0], g.callers[1:]
	return nil
}

// down stops the sessions, the responder and the stack.
func (g *generator) down() error {
	for _, c := range append(g.callers, g.ep) {
		c.mcp.Close()
	}
	var err error
	g.cursor, err = g.resp.stop()
	g.resp = nil
	return errors.Join(err, g.s.stop())
}

// point keeps the state at n bulk calls: the daemons' memory after
// serving since their start, then, stopped, the disk and the records, and
// a copy at GEN/points/N. The stack starts again unless it is the last.
func (g *generator) point(ctx context.Context, n int, last bool) error {
	served := g.meta.Samples[len(g.meta.Samples)-1]
	if err := g.down(); err != nil {
		return err
	}
	if g.meta.Oldest.AppBody == nil {
		if err := oldestOnDisk(g.s.l, &g.meta.Oldest); err != nil {
			return err
		}
	}
	if err := g.keep(n); err != nil {
		return err
	}
	g.meta.Points[len(g.meta.Points)-1].Served = &served
	g.meta.Outcomes = g.tally.snapshot()
	if err := g.meta.write(g.opts.Dir); err != nil {
		return err
	}
	if last {
		g.s = nil
		return nil
	}
	return g.up(ctx)
}

// keep records point n of the stopped state and copies it.
func (g *generator) keep(n int) error {
	p := GenPoint{Calls: n, Elapsed: time.Since(g.began).Seconds()}
	var err error
	if p.Disk, err = diskOf(g.s.l); err != nil {
		return err
	}
	if p.Records, err = recordsOf(g.s.l, p.Disk); err != nil {
		return err
	}
	g.meta.Points = append(g.meta.Points, p)
	dst := filepath.Join(g.opts.Dir, "points", strconv.Itoa(n))
	if err := copyTree(g.s.l.State, dst); err != nil {
		return err
	}
	fmt.Fprintf(g.opts.Log, "histgen: point %d kept in %s\n", n, dst)
	return nil
}

// sample reads the daemons' memory, with nothing in flight.
func (g *generator) sample(rate float64) error {
	sm := Sample{Calls: g.done, Rate: rate, Daemons: map[string]Served{}}
	// The appliance restarts only in the first episodes, before call 2.
	for name, c := range map[string]*child{"host": g.s.host, "controller": g.s.ctl, "appliance": g.s.app} {
		m, err := memOf(c.pid())
		if err != nil {
			return err
		}
		cpu, err := cpuOf(c.pid())
		if err != nil {
			return err
		}
		sm.Daemons[name] = Served{Since: g.done - g.from, RSS: m.rss, Anon: m.anon, HWM: m.hwm, CPU: cpu.Seconds()}
	}
	g.meta.Samples = append(g.meta.Samples, sm)
	return nil
}
