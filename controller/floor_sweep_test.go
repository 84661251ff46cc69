package controller

// The committed docs/callfloor-sweep.json and docs/callfloor-sweep.svg
// come from this command at the module's root (a test runs in its
// package's directory, so ../docs is the module's docs/):
//
//	go test -run '^$' -bench 'CallSweep' -benchtime=400x ./controller/ -sweep-out ../docs

import (
	"flag"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

var sweepOut = flag.String("sweep-out", "", "BenchmarkCallSweep writes callfloor-sweep.json and callfloor-sweep.svg to this directory")

// sweepClients are the client counts of BenchmarkCallSweep.
var sweepClients = []int{1, 2, 4, 8, 16, 32}

// BenchmarkCallSweep: direct, bare and governed (stdio) calls at 1, 2, 4,
// 8, 16 and 32 clients in one run, on BenchmarkCallFloor's rig. b.N is
// the calls each way makes at each count, in rounds of one phase of
// 25 calls per client of each way in turn. With -sweep-out DIR it writes
// every figure as DIR/callfloor-sweep.json and a latency (p50, p99)
// against throughput plot as DIR/callfloor-sweep.svg, so that a reader
// sees at a glance what custody costs.
func BenchmarkCallSweep(b *testing.B) {
	r := newFloorRig(b, sweepClients[len(sweepClients)-1], "direct", "bare", "stdio")
	rep := newFloorReport("BenchmarkCallSweep")
	for _, n := range sweepClients {
		b.Run("clients="+strconv.Itoa(n), func(b *testing.B) {
			res := runRounds(b, r.ways, n, b.N, 25*n)
			res.CtlRSSMB = rssMB(r.ctlPID)
			res.report(b)
			rep.add(res)
		})
	}
	if *sweepOut == "" {
		return
	}
	if err := rep.write(filepath.Join(*sweepOut, "callfloor-sweep.json")); err != nil {
		b.Fatal(err)
	}
	if err := sweepPlot(rep, filepath.Join(*sweepOut, "callfloor-sweep.svg")); err != nil {
		b.Fatal(err)
	}
}

// sweepPlot draws median and 99th percentile latency against calls/s,
// one colour per way (p50 solid, p99 dashed), each p50 point labelled by
// its client count; both axes are logarithmic, since direct calls are
// an order of magnitude faster than governed ones.
func sweepPlot(rep *floorReport, path string) error {
	p, err := sweepChart(rep)
	if err != nil {
		return err
	}
	c := vgsvg.New(9*vg.Inch, 6*vg.Inch)
	p.Draw(draw.New(c))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// sweepChart is sweepPlot's plot.
func sweepChart(rep *floorReport) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("text.sha256: latency against throughput, clients %v (%d CPUs, load %s)", sweepClients, rep.CPUs, rep.LoadStart)
	p.X.Label.Text = "calls/s"
	p.Y.Label.Text = "latency, ms"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = logTicks{}, logTicks{}
	p.Add(plotter.NewGrid())
	p.Legend.Left = true // direct is low right, governed high left
	for i, way := range []string{"direct", "bare", "stdio"} {
		var p50, p99 plotter.XYs
		var labels []string
		for _, run := range rep.Runs {
			for _, f := range run.Ways {
				if f.Way == way && f.CallsPerSec > 0 {
					p50 = append(p50, plotter.XY{X: f.CallsPerSec, Y: f.P50ms})
					p99 = append(p99, plotter.XY{X: f.CallsPerSec, Y: f.P99ms})
					labels = append(labels, strconv.Itoa(f.Clients))
				}
			}
		}
		if len(p50) == 0 {
			continue
		}
		name := way
		if way == "stdio" {
			name = "governed (stdio)"
		}
		if err := sweepLine(p, p50, plotutil.Color(i), nil, name+" p50"); err != nil {
			return nil, err
		}
		if err := sweepLine(p, p99, plotutil.Color(i), []vg.Length{vg.Points(4), vg.Points(3)}, name+" p99"); err != nil {
			return nil, err
		}
		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: p50, Labels: labels})
		if err != nil {
			return nil, err
		}
		for j := range lb.TextStyle {
			lb.TextStyle[j].Color = plotutil.Color(i)
		}
		lb.Offset = vg.Point{X: vg.Points(4), Y: vg.Points(-10)}
		p.Add(lb)
	}
	return p, nil
}

// logTicks marks 1, 2 and 5 times each power of ten in range, labelled,
// and the other digits unlabelled: plot.LogTicks labels only the powers,
// too few over the one or two decades a sweep spans.
type logTicks struct{}

// Ticks implements plot.Ticker.
func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for d := 1.0; d < 10; d++ {
			v := d * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if d == 1 || d == 2 || d == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// sweepLine adds one line with its points to p, in the legend as name.
func sweepLine(p *plot.Plot, xys plotter.XYs, col color.Color, dashes []vg.Length, name string) error {
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return err
	}
	l.Color, l.Dashes = col, dashes
	s.Color = col
	if dashes != nil {
		s.Shape = draw.CrossGlyph{}
	}
	p.Add(l, s)
	p.Legend.Add(name, l, s)
	return nil
}
