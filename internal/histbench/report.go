package histbench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
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

// byPoint groups the starts of one daemon by point.
func byPoint(r *Results, daemon string) (points []int, starts map[int][]Start) {
	starts = map[int][]Start{}
	for _, s := range r.Starts {
		if s.Daemon != daemon {
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

// WriteTable prints the generation's and the measurement's figures as the
// markdown tables of docs/HISTORY.md.
func WriteTable(w io.Writer, m *Meta, r *Results) {
	writeGeneration(w, m)
	fmt.Fprintf(w, "\nMeasured %s on %d CPUs, Linux %s, %s; load average %s before, %s after.\n",
		r.Machine.At.Format("2006-01-02 15:04 UTC"), r.Machine.CPUs, r.Machine.Kernel, r.Machine.Go, r.Machine.Load[0], r.Machine.Load[1])
	fmt.Fprintf(w, "\n| daemon | calls | start s | CPU s | RSS ready MB | RSS idle MB | HWM MB | replay first ms | replay median ms |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, d := range specs() {
		points, starts := byPoint(r, d.name)
		for _, n := range points {
			ss := starts[n]
			fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", d.name, n,
				pick(ss, func(s Start) float64 { return s.Ready }).String(1, 3),
				pick(ss, func(s Start) float64 { return s.CPU }).String(1, 2),
				pick(ss, func(s Start) float64 { return float64(s.RSSReady) }).String(1.0/mb, 1),
				pick(ss, func(s Start) float64 { return float64(s.RSSIdle) }).String(1.0/mb, 1),
				pick(ss, func(s Start) float64 { return float64(s.HWM) }).String(1.0/mb, 1),
				pick(ss, func(s Start) float64 { return s.ReplayFirst }).String(1e3, 2),
				pick(ss, func(s Start) float64 { return s.ReplayMedian }).String(1e3, 2))
		}
	}
	writeSlopes(w, m, r)
	writeDisk(w, m)
	writeServed(w, m)
}

// writeGeneration says what was generated and how fast.
func writeGeneration(w io.Writer, m *Meta) {
	last := m.Points[len(m.Points)-1]
	fmt.Fprintf(w, "Generated %d bulk calls (%d tool calls in all) in %.0f s with %d MCP sessions, %d clock days of %d calls; load average %s at the start, %s at the end.\n",
		last.Calls, sumOutcomes(m), last.Elapsed, m.Clients, m.Days, m.DayCalls, m.Load[0], m.Load[1])
	fmt.Fprintf(w, "\n| calls | calls/s since the last sample |\n|---:|---:|\n")
	for _, s := range m.Samples {
		fmt.Fprintf(w, "| %d | %.0f |\n", s.Calls, s.Rate)
	}
}

func sumOutcomes(m *Meta) int {
	n := 0
	for _, v := range m.Outcomes {
		n += v
	}
	return n
}

// slope is the per-call growth of f between the first and the last point,
// and f at the last point.
func slope(points []int, starts map[int][]Start, f func(Start) float64) (per float64, at float64) {
	a, b := points[0], points[len(points)-1]
	fa, fb := pick(starts[a], f).med, pick(starts[b], f).med
	if b == a {
		return 0, fb
	}
	return (fb - fa) / float64(b-a), fb
}

// writeSlopes prints what each call in the history costs at start, and
// where 10M calls would be at that slope.
func writeSlopes(w io.Writer, m *Meta, r *Results) {
	fmt.Fprintf(w, "\nPer call in the history, between the first and the last point (medians), and 10M calls at that slope:\n\n")
	fmt.Fprintf(w, "| daemon | start us/call | CPU us/call | RSS idle KB/call | start x (last / tenth of it) | start at 10M s | RSS idle at 10M MB |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|\n")
	const tenM = 10_000_000
	for _, d := range specs() {
		points, starts := byPoint(r, d.name)
		if len(points) < 2 {
			continue
		}
		last := points[len(points)-1]
		ps, s := slope(points, starts, func(s Start) float64 { return s.Ready })
		pc, _ := slope(points, starts, func(s Start) float64 { return s.CPU })
		pr, rss := slope(points, starts, func(s Start) float64 { return float64(s.RSSIdle) })
		ratio := "-"
		if ss := starts[last/10]; len(ss) > 0 {
			ratio = fmt.Sprintf("%.2f", s/pick(ss, func(s Start) float64 { return s.Ready }).med)
		}
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %.3f | %s | %.0f | %.0f |\n", d.name, ps*1e6, pc*1e6, pr/1024, ratio,
			s+ps*float64(tenM-last), (rss+pr*float64(tenM-last))/mb)
	}
}

// writeDisk prints the journals' sizes at each point.
func writeDisk(w io.Writer, m *Meta) {
	fmt.Fprintf(w, "\nDisk: each journal's records, and in brackets the bytes allocated to its directory (segments are preallocated, 4 MiB each in the dev mode):\n\n")
	fmt.Fprintf(w, "| calls | host MB | controller MB | appliance MB | total MB | KB/call | records host/controller/appliance |\n")
	fmt.Fprintf(w, "|---:|---:|---:|---:|---:|---:|---|\n")
	base := total(m.Points[0], false)
	for _, p := range m.Points {
		per := "-"
		if p.Calls > 0 {
			per = fmt.Sprintf("%.2f", float64(total(p, false)-base)/float64(p.Calls)/1024)
		}
		cell := func(d Disk) string { return fmt.Sprintf("%.1f (%.0f)", float64(d.Data)/mb, float64(d.Used)/mb) }
		fmt.Fprintf(w, "| %d | %s | %s | %s | %.1f (%.0f) | %s | %d/%d/%d |\n", p.Calls,
			cell(p.Disk["host"]), cell(p.Disk["controller"]), cell(p.Disk["appliance"]),
			float64(total(p, false))/mb, float64(total(p, true))/mb, per,
			count(p.Records["host"]), count(p.Records["controller"]), count(p.Records["appliance"]))
	}
	last := m.Points[len(m.Points)-1]
	if last.Calls > 0 {
		per := float64(total(last, false)-base) / float64(last.Calls)
		fmt.Fprintf(w, "\nAt that rate 10M calls take %.1f GB of journals; generating them at this run's rate, %.1f hours.\n",
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
	fmt.Fprintf(w, "\nKinds no generation holds:\n")
	for _, k := range slices.Sorted(maps.Keys(absentKinds)) {
		fmt.Fprintf(w, "- %s: %s\n", k, absentKinds[k])
	}
}

// total is the point's journals' record bytes, or with used the bytes
// allocated to them.
func total(p GenPoint, used bool) int64 {
	var t int64
	for _, d := range p.Disk {
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
func writeServed(w io.Writer, m *Meta) {
	fmt.Fprintf(w, "\nServed without a restart (the generator's daemons, read with no call in flight): calls since the daemon's start, VmRSS and VmHWM MB, and CPU us a call since the last sample:\n\n")
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
			cells = append(cells, fmt.Sprintf("%d / %.1f / %.1f / %s", v.Since, float64(v.RSS)/mb, float64(v.HWM)/mb, per))
		}
		fmt.Fprintf(w, "| %d | %s |\n", s.Calls, strings.Join(cells, " | "))
	}
}
