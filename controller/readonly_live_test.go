package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/internal/testenv"
	"github.com/stewardrt/steward/wire/msg"
)

// roVerb is a read-only command an operator runs while the daemons serve
// (OPERATING.md, DESIGN.md section 9), as its own process.
type roVerb struct {
	name  string
	argv  func(r *roRunner) (bin string, args []string)
	check func(r *roRunner, code int, stdout []byte) error // nil: exit 0
}

// roRunner runs the read-only commands against a stack, again and again,
// and counts the runs.
type roRunner struct {
	t      *testing.T
	s      *stack
	export string         // the host's receipts, as the last export wrote them
	runs   map[string]int // command -> runs
	rounds int
	quiet  bool      // no call under way: receipts compare must find nothing
	load   *callLoad // granted callsPerRound calls at each round; nil: none
}

// liveFindings are what receipts compare may find while calls are under
// way: the controller recorded a result after the host's export was
// taken. Any other finding fails the run.
var liveFindings = []string{
	"the receipt recorded here is not in the file (omitted, or the file ends before it)",
	"the file is truncated",
}

var roVerbs = []roVerb{
	{name: "steward-operator receipts export", argv: func(r *roRunner) (string, []string) {
		return operatorBin(r.t), []string{"receipts", "export", "--store", r.s.store, "--out", r.export}
	}},
	{name: "steward-controller receipts compare", argv: func(r *roRunner) (string, []string) {
		return controllerBin(r.t), []string{"receipts", "compare", "--file", r.export, "--config", r.s.cfgPath}
	}, check: func(r *roRunner, code int, stdout []byte) error {
		var c Comparison
		if err := json.Unmarshal(stdout, &c); err != nil {
			return fmt.Errorf("exit %d, no comparison on stdout: %v", code, err)
		}
		for _, f := range c.Findings {
			if r.quiet || !hasAny(f, liveFindings) {
				return fmt.Errorf("finding %q", f)
			}
		}
		if (code == 0) != (len(c.Findings) == 0) || code > 1 {
			return fmt.Errorf("exit %d with %d findings", code, len(c.Findings))
		}
		return nil
	}},
	{name: "steward-controller attempts list", argv: func(r *roRunner) (string, []string) {
		return controllerBin(r.t), []string{"attempts", "list", "--config", r.s.cfgPath, "--json"}
	}, check: func(_ *roRunner, code int, stdout []byte) error {
		var list []Attempt
		if code != 0 {
			return fmt.Errorf("exit %d", code)
		}
		return json.Unmarshal(stdout, &list)
	}},
	{name: "steward-controller journal inspect", argv: func(r *roRunner) (string, []string) {
		return controllerBin(r.t), []string{"journal", "inspect", "--config", r.s.cfgPath}
	}, check: func(_ *roRunner, code int, stdout []byte) error {
		var sum JournalSummary
		if code != 0 {
			return fmt.Errorf("exit %d", code)
		}
		if err := json.Unmarshal(stdout, &sum); err != nil || sum.LastSeq < 2 {
			return fmt.Errorf("summary %s: %v", stdout, err)
		}
		return nil
	}},
	{name: "steward-operator purse show", argv: func(r *roRunner) (string, []string) {
		return operatorBin(r.t), []string{"purse", "show", "dev", "--store", r.s.store, "--json"}
	}},
	{name: "steward-operator attempts list", argv: func(r *roRunner) (string, []string) {
		return operatorBin(r.t), []string{"attempts", "list", "--store", r.s.store}
	}},
}

// badWords are what a read-only command must never say of a live
// journal or of a snapshot being written.
var badWords = []string{"corrupt", "damaged", "snapshot refused", "torn"}

// round runs every command once; each must succeed, and none may say
// that the journal or a snapshot is damaged.
func (r *roRunner) round(phase string) {
	r.t.Helper()
	if r.load != nil {
		r.load.grant(callsPerRound)
	}
	for _, v := range roVerbs {
		bin, args := v.argv(r)
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			code = ee.ExitCode()
		case err != nil:
			r.t.Fatalf("%s: %s: %v", phase, v.name, err)
		}
		if v.check == nil && code != 0 {
			err = fmt.Errorf("exit %d", code)
		} else if v.check != nil {
			err = v.check(r, code, stdout.Bytes())
		}
		if err != nil {
			r.t.Fatalf("%s, round %d: %s: %v\nstdout: %s\nstderr: %s", phase, r.rounds, v.name, err, stdout.String(), stderr.String())
		}
		if lower := strings.ToLower(stderr.String()); hasAny(lower, badWords) {
			r.t.Fatalf("%s, round %d: %s says:\n%s", phase, r.rounds, v.name, stderr.String())
		}
		r.runs[v.name]++
	}
	r.rounds++
}

func hasAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// callLoad is agents calling the running controller, each call a new
// requestId, until stopped.
type callLoad struct {
	quit     chan struct{} // closed by end: no call begins after it
	once     sync.Once
	wg       sync.WaitGroup
	definite atomic.Int64
	refused  atomic.Int64 // refused with the journal's code
	other    atomic.Int64
	answered chan struct{} // a definite answer (dropped when full)
	gen      int
	mu       sync.Mutex
	others   []string // the first answers neither definite nor refused (journal)
	// tokens are the calls the clients may make: the test grants some
	// at each round of the commands, so that the journal (which receipts
	// export and compare read whole) grows by a bounded amount a round.
	tokens chan struct{}
}

// callsPerRound are the calls granted to the load at each round.
const callsPerRound = 150

// grant lets the clients make n more calls.
func (l *callLoad) grant(n int) {
	for range n {
		select {
		case l.tokens <- struct{}{}:
		default:
			return // plenty granted already
		}
	}
}

// add adds m's counts to l's.
func (l *callLoad) add(m *callLoad) {
	l.definite.Add(m.definite.Load())
	l.refused.Add(m.refused.Load())
	l.other.Add(m.other.Load())
	l.others = append(l.others, m.others...)
}

// startLoad starts clients agents calling; gen sets its requestIds apart
// from an earlier load's.
func startLoad(ctx context.Context, s *stack, clients, gen int) *callLoad {
	l := &callLoad{quit: make(chan struct{}), gen: gen, answered: make(chan struct{}, 1), tokens: make(chan struct{}, 4*callsPerRound)}
	for i := range clients {
		cs := s.client(ctx)
		l.wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-l.tokens:
				case <-l.quit:
					return
				}
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolCall, Arguments: callArgs(fmt.Sprintf("live-%d-%d-%d", l.gen, i, n), map[string]any{"text": "x"})})
				if err != nil {
					return // the controller exited: its proxy is gone
				}
				var tr ToolResult
				if len(res.Content) == 1 {
					json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &tr)
				}
				switch {
				case tr.Outcome == msg.StateDefinite:
					l.definite.Add(1)
					select {
					case l.answered <- struct{}{}:
					default:
					}
				case tr.Refusal != nil && tr.Refusal.Code == msg.CodeJournal:
					l.refused.Add(1)
				default:
					if l.other.Add(1) <= 3 && len(res.Content) == 1 {
						l.mu.Lock()
						l.others = append(l.others, res.Content[0].(*mcp.TextContent).Text)
						l.mu.Unlock()
					}
				}
			}
		})
	}
	return l
}

// end lets no call begin and waits for those under way to be answered
// (a call given up by its client would go on in the controller, and
// receipts compare would find its receipt recorded after the export).
func (l *callLoad) end() {
	l.once.Do(func() { close(l.quit) })
	l.wg.Wait()
}

// TestReadOnlyVerbsRunning: while agents' calls are journaled and the
// keeper snapshots (one every 4 records), every read-only command the
// operator is told to run succeeds, again and again, and never says that
// the journal or a snapshot is damaged.
func TestReadOnlyVerbsRunning(t *testing.T) { readOnlyVerbsLive(t, false) }

// TestReadOnlyVerbsFullDisk: the same on a full disk. The controller's
// state directory (journal, snapshots, index) is on a small tmpfs, filled
// while the calls go on: the read-only commands run while the controller
// refuses calls it cannot journal and fails the snapshots it cannot
// write, then again once space is freed and calls are answered again.
// At the end the host's receipts and the controller's agree, and its
// index is a whole replay's.
func TestReadOnlyVerbsFullDisk(t *testing.T) { readOnlyVerbsLive(t, true) }

func readOnlyVerbsLive(t *testing.T, full bool) {
	var disk string
	o := stackOpts{funded: 1 << 40}
	if full {
		disk = testenv.SmallTmpfs(t, 64<<20) // the journal grows by some 100 KiB a second
		o.edit = func(m map[string]any) { m["stateDir"] = filepath.Join(disk, "cstate") }
	}
	s := newStack(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	w, logs := newWatch(), &logLines{}
	opts := Options{SnapshotEvery: 4, hooks: w.hooks(), Logger: slog.New(slog.NewTextHandler(logs, nil))}
	if full {
		opts.JournalSegmentSize = 64 << 10
	}
	s.startControllerWith(opts)
	<-w.opened
	r := &roRunner{t: t, s: s, export: filepath.Join(s.dir, "receipts.cbor"), runs: map[string]int{}}
	load := startLoad(ctx, s, 3, 0)
	defer func() { load.end() }()
	r.load = load
	for snapshots := 0; snapshots < 3 || r.rounds < 6; snapshots += drain(w.snaps) {
		r.round("serving")
	}
	if full {
		load = fullDiskRounds(t, ctx, r, liveDaemon{w: w, logs: logs, opts: opts, disk: disk}, load)
	}
	load.end()
	r.load, r.quiet = nil, true
	before := r.rounds
	for r.rounds < before+3 {
		r.round("idle")
	}
	select {
	case err := <-s.ctlDone:
		t.Fatalf("the controller exited under the test: %v", err)
	default:
	}
	t.Logf("%d rounds of %d read-only commands (%v) during %d calls answered, %d refused (journal), %d other",
		r.rounds, len(roVerbs), r.runs, load.definite.Load(), load.refused.Load(), load.other.Load())
	t.Logf("the first other answers: %q", load.others)
	if load.definite.Load() == 0 {
		t.Fatal("no call answered under the load")
	}
	s.stopController()
	sameIndexAsFullReplay(t, s)
}

// liveDaemon is the running controller of a test: its watch, its log,
// the options it was started with and the tmpfs its state is on.
type liveDaemon struct {
	w    *watch
	logs *logLines
	opts Options
	disk string
}

// fullDiskRounds fills the disk under the load and runs the commands
// while the controller refuses the calls it cannot journal or look up
// (it exits once its index has stopped: the commands then read a
// stopped controller's journal), frees the space, starts the controller
// again if it exited (as systemd would) and runs them again once a call
// is answered. It returns the load that runs then.
func fullDiskRounds(t *testing.T, ctx context.Context, r *roRunner, d liveDaemon, load *callLoad) *callLoad {
	logs := d.logs
	begin, result, stopped := logs.next("journal begin failed"), logs.next("journal result failed"), logs.next("history index stopped for good")
	filler := testenv.FillDisk(t, filepath.Join(d.disk, "filler"))
	load.grant(callsPerRound)
	for full := false; !full; {
		select {
		case line := <-begin:
			t.Logf("full: %s", line)
			full = true
		case line := <-result:
			t.Logf("full: %s", line)
			full = true
		case line := <-stopped:
			t.Logf("full: %s", line)
			full = true
		case <-load.answered: // the segment still had room: more calls
			load.grant(callsPerRound)
		case <-ctx.Done():
			t.Fatalf("the disk is full and the controller journaled every call (%d answered)", load.definite.Load())
		}
	}
	before := r.rounds
	for r.rounds < before+6 {
		r.round("full disk")
	}
	t.Logf("%d calls refused while the disk was full", load.refused.Load())
	drain(load.answered)
	if err := filler.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filler.Name()); err != nil {
		t.Fatal(err)
	}
	load.grant(callsPerRound)
	select {
	case <-load.answered:
	case err := <-r.s.ctlDone:
		if err == nil || !strings.Contains(err.Error(), "history index stopped for good") {
			t.Fatalf("the controller exited on the full disk: %v", err)
		}
		t.Logf("the controller exited: %v; started again", err)
		r.s.stopCtl()
		r.s.stopCtl = nil
		load.end()
		r.s.startControllerWith(d.opts)
		<-d.w.opened
		next := startLoad(ctx, r.s, 3, 1)
		next.add(load)
		load, r.load = next, next
		load.grant(callsPerRound)
		select {
		case <-load.answered:
		case <-ctx.Done():
			t.Fatal("no call answered after the restart")
		}
	case <-ctx.Done():
		logs.mu.Lock()
		tail := logs.lines[max(0, len(logs.lines)-15):]
		logs.mu.Unlock()
		t.Fatalf("no call answered after the space was freed (%d refused, %d other); the log ends:\n%s", load.refused.Load(), load.other.Load(), strings.Join(tail, "\n"))
	}
	before = r.rounds
	for r.rounds < before+4 {
		r.round("space freed")
	}
	return load
}

// drain empties c and returns how many values it held.
func drain[T any](c chan T) int {
	for n := 0; ; n++ {
		select {
		case <-c:
		default:
			return n
		}
	}
}
