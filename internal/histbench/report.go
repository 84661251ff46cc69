package histbench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// figure is the median and the spread of one measure over the starts of
// one daemon at one point.
type figure struct{ med, lo, hi float64 }

func figureOf(v []float64) figure {
	if len(v) == 0 {
		return figure{}
	}
	s := slices.Sorted(slices.Values(v))
	return figure{med: s[len(s)/2], lo: s[0], hi: s[len(s)-1]}
}

func (f figure) String(scale float64, prec int) string {
	return fmt.Sprintf("%.*f (%.*f-%.*f)", prec, f.med*scale, prec, f.lo*scale, prec, f.hi*scale)
}

// key names one row of the tables: a daemon's starts at one point on one
// side, as kept or a snapshot back.
type key struct {
	side, daemon string
	back         bool
}

// byPoint groups the starts of one row by point.
func byPoint(r *Results, k key) (points []int, starts map[int][]Start) {
	starts = map[int][]Start{}
	for _, s := range r.Starts {
		if s.Side != k.side || s.Daemon != k.daemon || s.Back != k.back {
			continue
		}
		if _, ok := starts[s.Calls]; !ok {
			points = append(points, s.Calls)
		}
		starts[s.Calls] = append(starts[s.Calls], s)
	}
	sort.Ints(points)
	return points, starts
}

func pick(ss []Start, f func(Start) float64) figure {
	var v []float64
	for _, s := range ss {
		v = append(v, f(s))
	}
	return figureOf(v)
}

const mb = 1 << 20

// keys are the rows the results have, daemon by daemon, the sides in
// their order, each as kept and then a snapshot back.
func keys(sides []Side, r *Results) []key {
	var out []key
	for _, d := range specs() {
		for _, sd := range sides {
			for _, back := range []bool{false, true} {
				k := key{sd.Name, d.name, back}
				if p, _ := byPoint(r, k); len(p) > 0 {
					out = append(out, k)
				}
			}
		}
	}
	return out
}

func (k key) label() string {
	l := k.side
	if k.back {
		l += ", a snapshot back"
	}
	return l
}

// WriteTable prints the generations' and the measurement's figures as the
// markdown tables of docs/HISTORY.md.
func WriteTable(w io.Writer, sides []Side, r *Results) {
	for _, sd := range sides {
		writeGeneration(w, sd)
	}
	fmt.Fprintf(w, "\nMeasured %s on %d CPUs, Linux %s, %s; load average %s before, %s after.\n",
		r.Machine.At.Format("2006-01-02 15:04 UTC"), r.Machine.CPUs, r.Machine.Kernel, r.Machine.Go, r.Machine.Load[0], r.Machine.Load[1])
	writeStarts(w, sides, r)
	writeSlopes(w, sides, r)
	for _, sd := range sides {
		writeDisk(w, sd)
	}
	fmt.Fprintf(w, "\nKinds no generation holds:\n")
	for _, k := range slices.Sorted(maps.Keys(absentKinds)) {
		fmt.Fprintf(w, "- %s: %s\n", k, absentKinds[k])
	}
	for _, sd := range sides {
		writeServed(w, sd)
	}
}

// writeStarts is the table of every row's medians (and ranges) by point.
func writeStarts(w io.Writer, sides []Side, r *Results) {
	fmt.Fprintf(w, "\nStarts: medians of %s (start and CPU: the range in brackets); read is what the process read to readiness, replayed the records it says it replayed after its snapshot (- when it says nothing), RSS is VmRSS and in brackets RssAnon (VmRSS less the pages of mapped files: the bbolt index):\n\n", startsOf(r))
	fmt.Fprintf(w, "| daemon | calls | side | start s | CPU s | read MB | replayed | RSS ready MB | RSS after load MB | HWM MB | replay first ms | replay median ms |\n")
	fmt.Fprintf(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	rows := keys(sides, r)
	var points []int
	for _, k := range rows {
		p, _ := byPoint(r, k)
		points = append(points, p...)
	}
	points = slices.Compact(slices.Sorted(slices.Values(points)))
	med := func(ss []Start, f func(Start) float64, scale float64, prec int) string {
		return fmt.Sprintf("%.*f", prec, pick(ss, f).med*scale)
	}
	for _, d := range specs() {
		for _, n := range points {
			for _, k := range rows {
				_, starts := byPoint(r, k)
				ss := starts[n]
				if k.daemon != d.name || len(ss) == 0 {
					continue
				}
				fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s (%s) | %s (%s) | %s | %s | %s |\n", d.name, n, k.label(),
					pick(ss, func(s Start) float64 { return s.Ready }).String(1, 3),
					pick(ss, func(s Start) float64 { return s.CPU }).String(1, 2),
					med(ss, func(s Start) float64 { return float64(s.Read) }, 1.0/mb, 1),
					replayedOf(ss),
					med(ss, func(s Start) float64 { return float64(s.RSSReady) }, 1.0/mb, 1),
					med(ss, func(s Start) float64 { return float64(s.AnonReady) }, 1.0/mb, 1),
					med(ss, func(s Start) float64 { return float64(s.RSSLoad) }, 1.0/mb, 1),
					med(ss, func(s Start) float64 { return float64(s.AnonLoad) }, 1.0/mb, 1),
					med(ss, func(s Start) float64 { return float64(s.HWM) }, 1.0/mb, 1),
					med(ss, func(s Start) float64 { return s.ReplayFirst }, 1e3, 2),
					med(ss, func(s Start) float64 { return s.ReplayMedian }, 1e3, 2))
			}
		}
	}
}

// startsOf says how many starts each row has.
func startsOf(r *Results) string {
	n := 0
	for _, s := range r.Starts {
		n = max(n, s.Run)
	}
	if n == 1 {
		return "1 start (a single start)"
	}
	return strconv.Itoa(n) + " starts"
}

// replayedOf is the records replayed at the starts, "-" when the daemon
// said nothing of them, the range when they differ.
func replayedOf(ss []Start) string {
	f := pick(ss, func(s Start) float64 { return float64(s.Replayed) })
	switch {
	case f.lo < 0:
		return "-"
	case f.lo == f.hi:
		return fmt.Sprintf("%.0f", f.med)
	}
	return fmt.Sprintf("%.0f-%.0f", f.lo, f.hi)
}

// writeGeneration says what was generated and how fast.
func writeGeneration(w io.Writer, sd Side) {
	m := sd.Meta
	last := m.Points[len(m.Points)-1]
	fmt.Fprintf(w, "\n%sGenerated %d bulk calls (%d tool calls in all) in %.0f s with %d MCP sessions, %d clock days of %d calls; load average %s at the start, %s at the end.\n",
		sideHead(sd), last.Calls, sumOutcomes(m), last.Elapsed, m.Clients, m.Days, m.DayCalls, m.Load[0], m.Load[1])
	fmt.Fprintf(w, "\n| calls | calls/s since the last sample | s since the start |\n|---:|---:|---:|\n")
	for _, s := range m.Samples {
		el := "-"
		if p := m.Point(s.Calls); p != nil {
			el = fmt.Sprintf("%.0f", p.Elapsed)
		}
		fmt.Fprintf(w, "| %d | %.0f | %s |\n", s.Calls, s.Rate, el)
	}
}

// sideHead names a side before its own figures.
func sideHead(sd Side) string {
	if sd.Name == "" {
		return ""
	}
	return "**" + sd.Name + "** (" + sd.Dir + "): "
}

func sumOutcomes(m *Meta) int {
	n := 0
	for _, v := range m.Outcomes {
		n += v
	}
	return n
}

// slope is the per-call growth of f between the last two points (the
// largest), and f at the last point.
func slope(points []int, starts map[int][]Start, f func(Start) float64) (per float64, at float64) {
	a, b := points[max(0, len(points)-2)], points[len(points)-1]
	fa, fb := pick(starts[a], f).med, pick(starts[b], f).med
	if b == a {
		return 0, fb
	}
	return (fb - fa) / float64(b-a), fb
}

// writeSlopes prints what each call in the history costs at start
// between the two largest points, and where 10M calls would be at that
// slope (a straight line from the last point), for the starts as kept.
func writeSlopes(w io.Writer, sides []Side, r *Results) {
	fmt.Fprintf(w, "\nPer call in the history, between the two largest points (medians of the starts as kept), and 10M calls on that line:\n\n")
	fmt.Fprintf(w, "| daemon | side | from | to | start us/call | CPU us/call | read B/call | RSS (anon) after load KB/call | start x (last / the one before) | start at 10M s | RSS (anon) at 10M MB |\n")
	fmt.Fprintf(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	const tenM = 10_000_000
	for _, k := range keys(sides, r) {
		points, starts := byPoint(r, k)
		// A start a snapshot back replays wherever its point fell in the
		// snapshot interval: bounded, its line would be noise.
		if len(points) < 2 || k.back {
			continue
		}
		last := points[len(points)-1]
		ps, s := slope(points, starts, func(s Start) float64 { return s.Ready })
		pc, _ := slope(points, starts, func(s Start) float64 { return s.CPU })
		pb, _ := slope(points, starts, func(s Start) float64 { return float64(s.Read) })
		pr, rss := slope(points, starts, func(s Start) float64 { return float64(s.RSSLoad) })
		pa, anon := slope(points, starts, func(s Start) float64 { return float64(s.AnonLoad) })
		ratio := fmt.Sprintf("%.2f", s/pick(starts[points[len(points)-2]], func(s Start) float64 { return s.Ready }).med)
		fmt.Fprintf(w, "| %s | %s | %d | %d | %.2f | %.2f | %.0f | %.3f (%.3f) | %s | %.1f | %.0f (%.0f) |\n", k.daemon, k.label(),
			points[len(points)-2], last, ps*1e6, pc*1e6, pb, pr/1024, pa/1024, ratio,
			s+ps*float64(tenM-last), (rss+pr*float64(tenM-last))/mb, (anon+pa*float64(tenM-last))/mb)
	}
}

// writeDisk prints each daemon's history on disk at each point.
func writeDisk(w io.Writer, sd Side) {
	m := sd.Meta
	fmt.Fprintf(w, "\n%sDisk, each daemon's journal records / snapshots / history index in MB (snapshots and index: the bytes allocated to them), and the total with, in brackets, the bytes allocated (journal segments are preallocated, 4 MiB each in the dev mode):\n\n", sideHead(sd))
	fmt.Fprintf(w, "| calls | host | controller | appliance | total MB | KB/call | records host/controller/appliance |\n")
	fmt.Fprintf(w, "|---:|---|---|---|---:|---:|---|\n")
	base := total(m.Points[0], false)
	for _, p := range m.Points {
		per := "-"
		if p.Calls > 0 {
			per = fmt.Sprintf("%.2f", float64(total(p, false)-base)/float64(p.Calls)/1024)
		}
		cell := func(d Disk) string {
			return fmt.Sprintf("%.1f / %.1f / %.1f", float64(d.Data)/mb, float64(d.Snapshots)/mb, float64(d.Index)/mb)
		}
		fmt.Fprintf(w, "| %d | %s | %s | %s | %.1f (%.0f) | %s | %d/%d/%d |\n", p.Calls,
			cell(p.Disk["host"]), cell(p.Disk["controller"]), cell(p.Disk["appliance"]),
			float64(total(p, false))/mb, float64(total(p, true))/mb, per,
			count(p.Records["host"]), count(p.Records["controller"]), count(p.Records["appliance"]))
	}
	last := m.Points[len(m.Points)-1]
	if last.Calls > 0 {
		per := float64(total(last, false)-base) / float64(last.Calls)
		fmt.Fprintf(w, "\nAt that rate 10M calls take %.1f GB; generating them at this run's rate, %.1f hours.\n",
			(float64(base)+per*1e7)/(1<<30), last.Elapsed/float64(last.Calls)*1e7/3600)
	}
	fmt.Fprintf(w, "\nRecord kinds at %d calls:\n", last.Calls)
	for _, d := range []string{"host", "controller", "appliance"} {
		kinds := last.Records[d]
		var ks []string
		for _, k := range slices.Sorted(maps.Keys(kinds)) {
			ks = append(ks, fmt.Sprintf("%s %d", k, kinds[k]))
		}
		fmt.Fprintf(w, "- %s: %s\n", d, strings.Join(ks, ", "))
	}
}

// total is the point's history on disk: its journals' record bytes, or
// with used the bytes allocated to them, and the bytes allocated to the
// snapshots and the indexes.
func total(p GenPoint, used bool) int64 {
	var t int64
	for _, d := range p.Disk {
		t += d.Snapshots + d.Index
		if used {
			t += d.Used
		} else {
			t += d.Data
		}
	}
	return t
}

func count(kinds map[string]int) int {
	n := 0
	for _, v := range kinds {
		n += v
	}
	return n
}

// writeServed prints the generator daemons' memory after serving calls
// without a restart, and the CPU each spent a call since the sample before
// (in the same run of the daemon).
func writeServed(w io.Writer, sd Side) {
	m := sd.Meta
	fmt.Fprintf(w, "\n%sServed without a restart (the generator's daemons, read with no call in flight): calls since the daemon's start, VmRSS (RssAnon) and VmHWM MB, and CPU us a call since the last sample:\n\n", sideHead(sd))
	fmt.Fprintf(w, "| calls | host | controller | appliance |\n|---:|---|---|---|\n")
	for i, s := range m.Samples {
		var cells []string
		for _, d := range []string{"host", "controller", "appliance"} {
			v := s.Daemons[d]
			per := "-"
			if i > 0 {
				if p := m.Samples[i-1].Daemons[d]; p.Since < v.Since && v.CPU > 0 {
					per = fmt.Sprintf("%.0f", (v.CPU-p.CPU)/float64(v.Since-p.Since)*1e6)
				}
			}
			anon := "-" // not read by the generator that made the sample
			if v.Anon > 0 {
				anon = fmt.Sprintf("%.1f", float64(v.Anon)/mb)
			}
			cells = append(cells, fmt.Sprintf("%d / %.1f (%s) / %.1f / %s", v.Since, float64(v.RSS)/mb, anon, float64(v.HWM)/mb, per))
		}
		fmt.Fprintf(w, "| %d | %s |\n", s.Calls, strings.Join(cells, " | "))
	}
}
