package histbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stewardrt/steward/dev"
)

// MeasureOptions configure Measure.
type MeasureOptions struct {
	Points []int // which of the kept points; all when empty
	Starts int   // starts of each daemon at each point (default 3)
	// Idle is how long after its short load a daemon's memory is read
	// again, idle: no call reaches it then (default 2 s).
	Idle time.Duration
	// Back measures, besides each start on a point as it was kept, a
	// start on it with the daemon's newest snapshot removed (the one its
	// clean stop wrote): it loads the snapshot before and replays the
	// records after it, up to a snapshot interval. Sides without
	// snapshots have no such start.
	Back bool
	Log  io.Writer
}

// Side is one build measured on its own generation: the daemons of one
// commit (Bins) on a state its own code generated (Dir, Meta). Measure
// interleaves the sides start by start, so that the machine's load
// drifts alike over all of them.
type Side struct {
	Name string // "before", "after"; "" when only one is measured
	Dir  string // GEN, as Generate made it
	Bins Bins
	Meta *Meta
}

// Results are what Measure found.
type Results struct {
	Machine Machine `json:"machine"`
	Starts  []Start `json:"starts"`
}

// Machine is where and when it was measured.
type Machine struct {
	CPUs   int       `json:"cpus"`
	Kernel string    `json:"kernel"`
	Go     string    `json:"go"`
	At     time.Time `json:"at"`
	Load   [2]string `json:"load"` // /proc/loadavg before and after
}

// Start is one start of one daemon on one point.
type Start struct {
	Side   string `json:"side"`
	Daemon string `json:"daemon"`
	// Back is a start with the newest snapshot removed
	// (MeasureOptions.Back).
	Back  bool `json:"back,omitempty"`
	Calls int  `json:"calls"`
	Run   int  `json:"run"`
	// Ready is from exec to readiness, CPU what the process spent to get
	// there (its threads' user and system time), in seconds.
	Ready float64 `json:"ready"`
	CPU   float64 `json:"cpu"`
	// RSS at readiness, after the short load (the replays, and for
	// steward-dev loadCalls new calls) and the idle window, and the peak
	// (VmHWM), in bytes.
	RSSReady int64 `json:"rssReady"`
	RSSLoad  int64 `json:"rssLoad"`
	HWM      int64 `json:"hwm"`
	// AnonReady and AnonLoad are the RssAnon of RSSReady and RSSLoad:
	// without the pages of mapped files (a bbolt index).
	AnonReady int64 `json:"anonReady"`
	AnonLoad  int64 `json:"anonLoad"`
	// Read is what the process read (/proc/PID/io rchar: read(2) and
	// the like, page cache or not) from exec to readiness, in bytes.
	Read int64 `json:"read"`
	// Replayed is how many records the daemon says it replayed at start
	// after the snapshot it loaded (Snapshot, "" for a full replay); -1
	// when it says nothing of it (a daemon without history).
	Replayed int64  `json:"replayed"`
	Snapshot string `json:"snapshot,omitempty"`
	// ReplayFirst is the first answer to the oldest requestId after the
	// start, ReplayMedian the median of the next ones, in seconds; 0 at
	// a point without calls.
	ReplayFirst  float64 `json:"replayFirst"`
	ReplayMedian float64 `json:"replayMedian"`
	Load         string  `json:"load"`
}

// replays is how many times the oldest requestId is asked after a start.
const replays = 10

// daemonSpec is how one command is started on a dev state and asked for
// its oldest requestId.
type daemonSpec struct {
	name   string
	parts  func(l dev.Layout) []string // the directories it reads, restored before a start; nil: all
	notify bool                        // READY=1 on NOTIFY_SOCKET, else a ready line on stdout
	load   bool                        // it serves calls alone: loadCalls new ones are made after the replays
	ready  string
	cmd    func(b Bins, l dev.Layout) (string, []string)
	probe  func(ctx context.Context, l dev.Layout, o *OldestCall) (prober, error)
}

func specs() []daemonSpec {
	return []daemonSpec{{
		name: "host", notify: true, parts: func(l dev.Layout) []string { return []string{l.OperatorStore} },
		cmd: func(b Bins, l dev.Layout) (string, []string) {
			return b.Operator, []string{"serve", "--store", l.OperatorStore}
		},
		probe: hostProbe,
	}, {
		name: "controller", notify: true, parts: func(l dev.Layout) []string { return []string{l.Controller} },
		cmd: func(b Bins, l dev.Layout) (string, []string) {
			return b.Controller, []string{"serve", "--config", l.Config}
		},
		probe: mcpProbe,
	}, {
		name: "appliance", ready: "ready ", parts: func(l dev.Layout) []string { return []string{l.Appliance} },
		cmd: func(b Bins, l dev.Layout) (string, []string) {
			// info: its line "history opened" says what it replayed.
			return b.Appliance, []string{"serve", "--socket", l.ApplianceSocket, "--state", l.Appliance, "--log-level", "info"}
		},
		probe: applianceProbe,
	}, {
		name: "steward-dev", ready: "steward-dev: ready.", load: true,
		cmd: func(b Bins, l dev.Layout) (string, []string) {
			return b.Dev, []string{"--state", l.State, "--log-level", "warn"}
		},
		probe: mcpProbe,
	}}
}

// Measure starts each daemon opts.Starts times on each point of each
// side's generation, each time on a fresh copy restored to its GEN/state,
// the sides in turn at every start.
func Measure(ctx context.Context, opts MeasureOptions, sides []Side) (*Results, error) {
	if opts.Starts <= 0 {
		opts.Starts = 3
	}
	if opts.Idle <= 0 {
		opts.Idle = 2 * time.Second
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if len(sides) == 0 {
		return nil, errors.New("nothing to measure")
	}
	points := opts.Points
	if len(points) == 0 {
		points = sides[0].Meta.pointCalls()
	}
	runs, err := sideRuns(sides, points)
	if err != nil {
		return nil, err
	}
	ns, err := listenNotify()
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	res := &Results{Machine: machine()}
	for _, n := range points {
		for _, d := range specs() {
			for run := 1; run <= opts.Starts; run++ {
				for _, sr := range runs {
					for _, back := range sr.variants(opts.Back, n, d) {
						st, err := startOnce(ctx, opts, d, sr, ns, n, back)
						if err != nil {
							return nil, fmt.Errorf("%s%s at %d calls, start %d: %w", sr.label(), d.name, n, run, err)
						}
						st.Run = run
						logStart(opts.Log, sr, st)
						res.Starts = append(res.Starts, st)
					}
				}
			}
		}
	}
	res.Machine.Load[1] = loadavg()
	return res, nil
}

// sideRun is a side with its state's layout.
type sideRun struct {
	Side
	l dev.Layout
}

func sideRuns(sides []Side, points []int) ([]sideRun, error) {
	var out []sideRun
	for _, s := range sides {
		l, err := dev.NewLayout(s.Meta.State)
		if err != nil {
			return nil, err
		}
		for _, n := range points {
			if s.Meta.Point(n) == nil {
				return nil, fmt.Errorf("%spoint %d was not generated (%v were)", sideRun{Side: s}.label(), n, s.Meta.pointCalls())
			}
		}
		out = append(out, sideRun{Side: s, l: l})
	}
	return out, nil
}

func (sr sideRun) label() string {
	if sr.Name == "" {
		return ""
	}
	return sr.Name + ": "
}

// variants are the starts of daemon d at point n: as kept, and with
// opts.Back one a snapshot back when d has snapshots there (steward-dev:
// when any of its parts has).
func (sr sideRun) variants(back bool, n int, d daemonSpec) []bool {
	if back && n > 0 && sr.Meta.Point(n).hasSnapshots(d.name) {
		return []bool{false, true}
	}
	return []bool{false}
}

func logStart(w io.Writer, sr sideRun, st Start) {
	var back string
	if st.Back {
		back = " (a snapshot back)"
	}
	fmt.Fprintf(w, "histbench: %s%s%s at %d calls: ready in %.3f s, CPU %.2f s, read %.1f MB, replayed %d, RSS %.1f MB, replay %.2f ms\n",
		sr.label(), st.Daemon, back, st.Calls, st.Ready, st.CPU, float64(st.Read)/(1<<20), st.Replayed,
		float64(st.RSSReady)/(1<<20), st.ReplayFirst*1e3)
}

func machine() Machine {
	var u syscall.Utsname
	syscall.Uname(&u)
	var rel []byte
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		rel = append(rel, byte(c))
	}
	return Machine{CPUs: runtime.NumCPU(), Kernel: string(rel), Go: runtime.Version(), At: time.Now().UTC(),
		Load: [2]string{loadavg(), ""}}
}

// startOnce restores the point's state (with back, less the newest
// snapshot), starts the daemon, reads its figures, asks its oldest
// requestId (steward-dev: and makes loadCalls new calls), waits out the
// idle window and stops it, which must be clean.
func startOnce(ctx context.Context, o MeasureOptions, d daemonSpec, sr sideRun, ns *notifySocket, n int, back bool) (Start, error) {
	st := Start{Side: sr.Name, Daemon: d.name, Back: back, Calls: n, Load: loadavg()}
	if err := restoreParts(sr.Dir, n, d, sr.l, back); err != nil {
		return st, err
	}
	bin, args := d.cmd(sr.Bins, sr.l)
	p, err := launch(sr.Dir, d, bin, args, ns)
	if err != nil {
		return st, err
	}
	defer p.kill()
	st.Ready = p.ready.Sub(p.began).Seconds()
	pid := p.cmd.Process.Pid
	cpu, err := cpuOf(pid)
	if err == nil {
		st.CPU = cpu.Seconds()
		var m mem
		m, err = memOf(pid)
		st.RSSReady, st.AnonReady, st.HWM = m.rss, m.anon, m.hwm
	}
	if err == nil {
		st.Read, err = readOf(pid)
	}
	if err == nil {
		st.Snapshot, st.Replayed, err = loadedIn(p.log, p.logFrom)
	}
	if err != nil {
		return st, err
	}
	if n > 0 {
		if st.ReplayFirst, st.ReplayMedian, err = replay(ctx, d, sr.l, &sr.Meta.Oldest); err != nil {
			return st, fmt.Errorf("the oldest requestId: %w", err)
		}
	}
	if d.load {
		if err := loadDev(ctx, sr.l, n); err != nil {
			return st, fmt.Errorf("the load: %w", err)
		}
	}
	select {
	case <-time.After(o.Idle):
	case <-p.exited:
		return st, fmt.Errorf("it exited while idle (%v); its log is %s", p.err, p.log)
	}
	m, err := memOf(pid)
	if err != nil {
		return st, err
	}
	st.RSSLoad, st.AnonLoad, st.HWM = m.rss, m.anon, m.hwm
	return st, p.stop()
}

// restoreParts makes GEN/state the point's state again where the daemon
// reads it (all of it for steward-dev), and its socket directory: made
// for a daemon alone, absent for steward-dev, which makes its own. With
// back, the newest snapshot of each daemon it restored is removed.
func restoreParts(gen string, n int, d daemonSpec, l dev.Layout, back bool) error {
	src := filepath.Join(gen, "points", strconv.Itoa(n))
	parts := []string{l.OperatorStore, l.Controller, l.Appliance}
	whole := d.parts == nil
	if whole {
		if err := restore(src, l.State); err != nil {
			return err
		}
	} else {
		parts = d.parts(l)
	}
	for _, dst := range parts {
		if !whole {
			rel, err := filepath.Rel(l.State, dst)
			if err != nil {
				return err
			}
			if err := restore(filepath.Join(src, rel), dst); err != nil {
				return err
			}
		}
		if back {
			if err := dropNewestSnapshot(dst); err != nil {
				return err
			}
		}
	}
	if err := os.RemoveAll(l.Run); err != nil {
		return err
	}
	if whole {
		return nil
	}
	return os.Mkdir(l.Run, 0o700)
}

// proc is one measured process.
type proc struct {
	cmd     *exec.Cmd
	log     string
	logFrom int64 // the log's size before this start
	began   time.Time
	ready   time.Time
	exited  chan struct{}
	err     error
}

// launch starts the daemon and returns once it is ready.
func launch(gen string, d daemonSpec, bin string, args []string, ns *notifySocket) (*proc, error) {
	p := &proc{cmd: exec.Command(bin, args...), log: filepath.Join(gen, "logs", "measure-"+d.name+".log"), exited: make(chan struct{})}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	if p.logFrom, err = logf.Seek(0, io.SeekEnd); err != nil {
		return nil, err
	}
	p.cmd.Stderr = logf
	p.cmd.Env = append(os.Environ(), "NOTIFY_SOCKET=")
	var out io.ReadCloser
	if d.notify {
		p.cmd.Env = append(p.cmd.Env, "NOTIFY_SOCKET="+ns.path)
		p.cmd.Stdout = logf
	} else if out, err = p.cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	p.began = time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	lines := make(chan string, 1)
	go func() {
		if out != nil {
			readLines(out, d.ready, lines)
		}
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	if d.notify {
		err = ns.ready(p.cmd.Process.Pid, readyWithin, p.exited)
	} else {
		select {
		case <-lines:
		case <-p.exited:
			err = fmt.Errorf("it exited (%v) before its ready line", p.err)
		case <-time.After(readyWithin):
			err = fmt.Errorf("no ready line within %v", readyWithin)
		}
	}
	p.ready = time.Now()
	if err != nil {
		p.kill()
		return nil, fmt.Errorf("%w; its log is %s", err, p.log)
	}
	return p, nil
}

// readLines reads out to its end, sending the first line that starts
// with ready.
func readLines(out io.Reader, ready string, lines chan<- string) {
	sc := bufio.NewScanner(out)
	sent := false
	for sc.Scan() {
		if !sent && strings.HasPrefix(sc.Text(), ready) {
			lines <- sc.Text()
			sent = true
		}
	}
}

// stop stops the process with SIGTERM: it must exit 0.
func (p *proc) stop() error {
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.exited
	if p.err != nil {
		return fmt.Errorf("its stop: %v; its log is %s", p.err, p.log)
	}
	return nil
}

// kill ends a process that has not stopped (no-op once it has).
func (p *proc) kill() {
	select {
	case <-p.exited:
	default:
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
	}
}

// replay asks the daemon its oldest requestId replays times: the first
// latency and the median of the others.
func replay(ctx context.Context, d daemonSpec, l dev.Layout, o *OldestCall) (first, median float64, err error) {
	pr, err := d.probe(ctx, l, o)
	if err != nil {
		return 0, 0, err
	}
	defer pr.Close()
	var lat []float64
	for range replays {
		t0 := time.Now()
		if err := pr.ask(ctx); err != nil {
			return 0, 0, err
		}
		lat = append(lat, time.Since(t0).Seconds())
	}
	rest := slices.Clone(lat[1:])
	slices.Sort(rest)
	return lat[0], rest[len(rest)/2], nil
}
