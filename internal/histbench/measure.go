package histbench

import (
	"bufio"
	"context"
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
	Dir    string // GEN, as Generate made it
	Bins   Bins
	Points []int // which of the kept points; all when empty
	Starts int   // starts of each daemon at each point (default 3)
	// Idle is how long after its readiness a daemon's memory is read
	// again, idle: no call reaches it then (default 2 s).
	Idle time.Duration
	Log  io.Writer
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
	Daemon string `json:"daemon"`
	Calls  int    `json:"calls"`
	Run    int    `json:"run"`
	// Ready is from exec to readiness, CPU what the process spent to get
	// there (its threads' user and system time), in seconds.
	Ready float64 `json:"ready"`
	CPU   float64 `json:"cpu"`
	// RSS at readiness, after the idle window, and the peak (VmHWM), in
	// bytes.
	RSSReady int64 `json:"rssReady"`
	RSSIdle  int64 `json:"rssIdle"`
	HWM      int64 `json:"hwm"`
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
			return b.Appliance, []string{"serve", "--socket", l.ApplianceSocket, "--state", l.Appliance, "--log-level", "warn"}
		},
		probe: applianceProbe,
	}, {
		name: "steward-dev", ready: "steward-dev: ready.",
		cmd: func(b Bins, l dev.Layout) (string, []string) {
			return b.Dev, []string{"--state", l.State, "--log-level", "warn"}
		},
		probe: mcpProbe,
	}}
}

// Measure starts each daemon opts.Starts times on each point of the
// generation m in opts.Dir, each time on a fresh copy restored to
// GEN/state.
func Measure(ctx context.Context, opts MeasureOptions, m *Meta) (*Results, error) {
	if opts.Starts <= 0 {
		opts.Starts = 3
	}
	if opts.Idle <= 0 {
		opts.Idle = 2 * time.Second
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	points := opts.Points
	if len(points) == 0 {
		points = m.pointCalls()
	}
	l, err := dev.NewLayout(m.State)
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
		if m.Point(n) == nil {
			return nil, fmt.Errorf("point %d was not generated (%v were)", n, m.pointCalls())
		}
		for _, d := range specs() {
			for run := 1; run <= opts.Starts; run++ {
				st, err := startOnce(ctx, opts, d, l, ns, m, n)
				if err != nil {
					return nil, fmt.Errorf("%s at %d calls, start %d: %w", d.name, n, run, err)
				}
				st.Run = run
				fmt.Fprintf(opts.Log, "histbench: %s at %d calls: ready in %.3f s, CPU %.2f s, RSS %.1f MB, replay %.2f ms\n",
					d.name, n, st.Ready, st.CPU, float64(st.RSSReady)/(1<<20), st.ReplayFirst*1e3)
				res.Starts = append(res.Starts, st)
			}
		}
	}
	res.Machine.Load[1] = loadavg()
	return res, nil
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

// startOnce restores the point's state, starts the daemon, reads its
// figures, asks its oldest requestId, waits out the idle window and stops
// it, which must be clean.
func startOnce(ctx context.Context, o MeasureOptions, d daemonSpec, l dev.Layout, ns *notifySocket, m *Meta, n int) (Start, error) {
	st := Start{Daemon: d.name, Calls: n, Load: loadavg()}
	if err := restoreParts(o.Dir, n, d, l); err != nil {
		return st, err
	}
	bin, args := d.cmd(o.Bins, l)
	p, err := launch(o.Dir, d, bin, args, ns)
	if err != nil {
		return st, err
	}
	defer p.kill()
	st.Ready = p.ready.Sub(p.began).Seconds()
	cpu, err := cpuOf(p.cmd.Process.Pid)
	if err != nil {
		return st, err
	}
	st.CPU = cpu.Seconds()
	if st.RSSReady, st.HWM, err = memOf(p.cmd.Process.Pid); err != nil {
		return st, err
	}
	if n > 0 {
		if st.ReplayFirst, st.ReplayMedian, err = replay(ctx, d, l, &m.Oldest); err != nil {
			return st, fmt.Errorf("the oldest requestId: %w", err)
		}
	}
	select {
	case <-time.After(time.Until(p.ready.Add(o.Idle))):
	case <-p.exited:
		return st, fmt.Errorf("it exited while idle (%v); its log is %s", p.err, p.log)
	}
	if st.RSSIdle, st.HWM, err = memOf(p.cmd.Process.Pid); err != nil {
		return st, err
	}
	return st, p.stop()
}

// restoreParts makes GEN/state the point's state again where the daemon
// reads it (all of it for steward-dev), and its socket directory: made
// for a daemon alone, absent for steward-dev, which makes its own.
func restoreParts(gen string, n int, d daemonSpec, l dev.Layout) error {
	src := filepath.Join(gen, "points", strconv.Itoa(n))
	parts := []string{l.State}
	if d.parts != nil {
		parts = d.parts(l)
	}
	for _, dst := range parts {
		rel, err := filepath.Rel(l.State, dst)
		if err != nil {
			return err
		}
		if err := restore(filepath.Join(src, rel), dst); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(l.Run); err != nil {
		return err
	}
	if d.parts == nil {
		return nil
	}
	return os.Mkdir(l.Run, 0o700)
}

// proc is one measured process.
type proc struct {
	cmd    *exec.Cmd
	log    string
	began  time.Time
	ready  time.Time
	exited chan struct{}
	err    error
}

// launch starts the daemon and returns once it is ready.
func launch(gen string, d daemonSpec, bin string, args []string, ns *notifySocket) (*proc, error) {
	p := &proc{cmd: exec.Command(bin, args...), log: filepath.Join(gen, "logs", "measure-"+d.name+".log"), exited: make(chan struct{})}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
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
