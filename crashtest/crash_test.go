package crashtest

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/testenv"
)

var (
	crashDuration = flag.Duration("crash.duration", 0, "how long the daemons are killed and restarted under load (default 5s, 60s with CI=true)")
	crashClients  = flag.Int("crash.clients", 4, "how many MCP clients call at once")
)

// duration is the chaos phase's length: the flag, else 60 s under CI and
// 5 s otherwise, so that `go test ./...` stays quick and CI runs the
// harness for real.
func duration() time.Duration {
	switch {
	case *crashDuration > 0:
		return *crashDuration
	case testenv.CI():
		return 60 * time.Second
	default:
		return 5 * time.Second
	}
}

// TestCrash runs the stack under load while a random daemon is SIGKILLed
// every 1-3 s and restarted, then settles every uncertain attempt, retries
// every unfinished requestId once, stops the daemons and accounts for every
// requestId in the three journals (see the package doc).
func TestCrash(t *testing.T) {
	if *crashClients < 1 {
		t.Fatalf("-crash.clients=%d: at least one client is needed", *crashClients)
	}
	s := newStack(t)
	h := &harness{s: s, up: newControllerUp(), book: &callBook{calls: map[string]*call{}}, running: map[string]*daemon{}, generation: map[string]int{}, exits: make(chan *daemon, 64)}
	for _, n := range daemonNames {
		h.startDaemon(n)
	}
	defer h.stopAll()

	load, stopLoad := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range *crashClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			(&client{n: i, socket: s.mcpSocket, up: h.up, book: h.book}).run(load)
		}()
	}
	h.chaos(duration())
	stopLoad()
	wg.Wait()

	h.drainExits()
	resolved, redelivered, onHost := h.resolveUncertain()
	h.retryUnfinished()
	h.drainExits()
	if err := h.stopAll(); err != nil {
		t.Errorf("a daemon did not stop cleanly: %v", err)
	}
	r := account(h.book, s.readJournals(), onHost)
	r.Kills, r.Resolved, r.Redelivered, r.Duration, r.Clients = h.kills, resolved, redelivered, duration().String(), *crashClients
	b, _ := json.MarshalIndent(r, "", "  ")
	t.Logf("crash report:\n%s", b)
	for _, f := range r.failures() {
		t.Error(f)
	}
	for _, u := range h.unexpected {
		t.Error(u)
	}
}

// harness is the running stack and its clients' ledger.
type harness struct {
	s          *stack
	up         *controllerUp
	book       *callBook
	running    map[string]*daemon
	generation map[string]int
	kills      map[string]int
	// exits receives every daemon that ended without being killed or
	// stopped; unexpected lists them.
	exits      chan *daemon
	unexpected []string
}

func (h *harness) startDaemon(name string) {
	h.generation[name]++
	d := h.s.start(name, h.generation[name])
	h.running[name] = d
	go func() {
		<-d.ended
		if !d.killed.Load() {
			h.exits <- d
		}
	}()
	if name == "ctl" {
		h.up.ready()
	}
}

// exitedByItself records a daemon that ended on its own and starts it
// again.
func (h *harness) exitedByItself(d *daemon) {
	h.unexpected = append(h.unexpected, fmt.Sprintf("%s exited by itself (%v); see %s", d.name, d.err, d.log.Name()))
	if h.running[d.name] == d {
		if d.name == "ctl" {
			h.up.down()
		}
		h.startDaemon(d.name)
	}
}

// drainExits takes in every unexpected exit reported so far.
func (h *harness) drainExits() {
	for {
		select {
		case d := <-h.exits:
			h.exitedByItself(d)
		default:
			return
		}
	}
}

// chaos kills a random daemon every 1-3 s until d has passed, restarting
// each at once (waiting for its readiness).
func (h *harness) chaos(d time.Duration) {
	h.kills = map[string]int{}
	end := time.After(d)
	for {
		next := time.NewTimer(time.Second + rand.N(2*time.Second))
		select {
		case <-end:
			next.Stop()
			return
		case d := <-h.exits:
			next.Stop()
			h.exitedByItself(d)
			continue
		case <-next.C:
		}
		name := daemonNames[rand.N(len(daemonNames))]
		if name == "ctl" {
			h.up.down()
		}
		h.running[name].kill()
		h.kills[name]++
		h.startDaemon(name)
	}
}

// stopAll stops every running daemon, the controller first, and returns
// the first exit error.
func (h *harness) stopAll() error {
	var first error
	for i := len(daemonNames) - 1; i >= 0; i-- {
		d := h.running[daemonNames[i]]
		if d == nil {
			continue
		}
		delete(h.running, daemonNames[i])
		if err := d.stop(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// listedAttempt is one line of `attempts list --json`.
type listedAttempt struct {
	ID string `json:"id"`
}

// hostUncertain is how `attempts resolve` refuses an attempt the host
// itself holds uncertain (killed after marking it sent, before an
// outcome): its reservation stays held until the host's operator settles
// it (steward-operator attempts resolve), which the harness does by
// redelivering it (redeliver).
const hostUncertain = "the host reports it uncertain"

// endedMeanwhile is how `attempts resolve` refuses an attempt that was
// listed open and ended before the command ran.
const endedMeanwhile = "is ended, not uncertain"

// resolveUncertain settles every attempt the controller lists as
// uncertain with `steward-controller attempts resolve`, as an operator
// would. One the host itself holds uncertain (killed after marking it
// sent, before an outcome) is first redelivered by the host's operator
// (`steward-operator attempts resolve --redeliver`: the same request
// bytes and application requestId, no second reservation; the
// application answers it from its journal if it ran it), then resolved
// on the controller. It returns how many it resolved, how many of them
// were redelivered, and how many the host still holds uncertain.
func (h *harness) resolveUncertain() (resolved, redelivered, onHost int) {
	var list []listedAttempt
	if err := json.Unmarshal(h.s.run("steward-controller", "attempts", "list", "--config", h.s.ctlConfig, "--json"), &list); err != nil {
		h.s.t.Fatalf("attempts list --json: %v", err)
	}
	for _, a := range list {
		_, stderr, err := h.s.try("steward-controller", "attempts", "resolve", a.ID, "--config", h.s.ctlConfig)
		switch {
		case err == nil:
			resolved++
		case strings.Contains(stderr, hostUncertain):
			if h.redeliver(a.ID) {
				resolved++
				redelivered++
			} else {
				onHost++
			}
		case strings.Contains(stderr, endedMeanwhile):
			// A dispatch whose agent gave up when the load stopped was
			// still on its way and ended after the list was read: the
			// journals' accounting at the end checks how.
		default:
			h.s.t.Fatalf("attempts resolve %s: %v\n%s", a.ID, err, stderr)
		}
	}
	return resolved, redelivered, onHost
}

// redeliver has the host's operator redeliver attempt id, then resolves
// it on the controller, reporting whether both succeeded. A redelivery
// that fails leaves the attempt uncertain on the host (it is reported,
// not retried).
func (h *harness) redeliver(id string) bool {
	_, stderr, err := h.s.try("steward-operator", "attempts", "resolve", id, "--redeliver",
		"--reason", "crash harness: the host was killed before the outcome", "--store", h.s.store)
	if err != nil {
		h.s.t.Logf("attempts resolve %s --redeliver: %v: %s", id, err, stderr)
		return false
	}
	if _, stderr, err := h.s.try("steward-controller", "attempts", "resolve", id, "--config", h.s.ctlConfig); err != nil {
		h.s.t.Errorf("attempts resolve %s after its redelivery: %v\n%s", id, err, stderr)
		return false
	}
	return true
}

// retryUnfinished retries once, on a calm stack, every requestId that has
// no definite answer yet: the agent's last retry.
func (h *harness) retryUnfinished() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := &client{n: -1, socket: h.s.mcpSocket, up: h.up, book: h.book}
	var todo []*call
	for _, k := range h.book.calls {
		k.chaosLast = k.last
		if k.last != outDefinite {
			todo = append(todo, k)
		}
	}
	for _, k := range todo {
		c.do(ctx, k)
	}
	c.dropSession()
}
