package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// listing is what a directory listing found.
type listing struct {
	segs     []segment // by first seq
	evidence []string
	tmps     []string
}

func listDir(dir string) (listing, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return listing{}, fmt.Errorf("journal: list %s: %w", dir, err)
	}
	var ls listing
	for _, e := range entries {
		name := e.Name()
		switch first, ok := parseSegName(name); {
		case ok && first == 0:
			return listing{}, &CorruptError{Segment: filepath.Join(dir, name), Reason: "segment named for seq 0"}
		case ok:
			ls.segs = append(ls.segs, segment{name: name, first: first})
		case strings.HasSuffix(name, segSuffix+tmpSuffix):
			ls.tmps = append(ls.tmps, name)
		case strings.Contains(name, segSuffix+tornInfix):
			ls.evidence = append(ls.evidence, name)
		}
	}
	sort.Slice(ls.segs, func(a, b int) bool { return ls.segs[a].first < ls.segs[b].first })
	return ls, nil
}

// loadPlan says what part of the log a load reads.
type loadPlan struct {
	from    *Mark      // go on from this mark; nil: from record 1
	stop    *watermark // read up to this durable end and nothing past it; nil: to the end
	lenient bool       // a bad frame in the last segment ends the read, unjudged
}

// loaded is what a load found. Open takes it only once the load passed.
type loaded struct {
	segs     []segment
	ch       chain
	torn     *tornTail
	evidence []string
	tmps     []string
	seg      *os.File // the last segment, open read-write (read-write journals)
	segPath  string
}

func (l *loaded) close() {
	if l != nil && l.seg != nil {
		l.seg.Close()
		l.seg = nil
	}
}

// staleWatermark is a watermark the log does not bear out (a log copied
// or restored under a running owner's old watermark): the read is redone
// without it.
type staleWatermark struct{ reason string }

func (e *staleWatermark) Error() string {
	return "journal: the watermark does not match the log: " + e.reason
}

// load verifies the log as Options say and takes what it found. It changes
// nothing on disk: a torn tail is kept for repair (read-write) or reported
// (read-only).
func (j *Journal) load() error {
	var l *loaded
	var err error
	if j.opts.ReadOnly {
		l, err = j.loadReadOnly()
	} else {
		l, err = j.loadPlan(loadPlan{from: j.opts.From})
	}
	if err != nil {
		l.close()
		return err
	}
	j.adopt(l)
	return nil
}

// loadPlan lists the directory and verifies the segments plan p names, in
// order.
func (j *Journal) loadPlan(p loadPlan) (*loaded, error) {
	ls, err := listDir(j.dir)
	if err != nil {
		return nil, err
	}
	l := &loaded{evidence: ls.evidence, tmps: ls.tmps, ch: newChain()}
	segs, start := ls.segs, 0
	if p.from != nil {
		if start, err = j.skipToMark(p.from, segs); err != nil {
			return nil, err
		}
		l.ch = chainFrom(p.from)
	}
	if p.stop != nil {
		if segs, err = cutAt(segs, p.stop, p.from); err != nil {
			return nil, err
		}
	}
	for i := start; i < len(segs); i++ {
		if err := j.loadSegment(l, p, segs, i, i == start && p.from != nil); err != nil {
			l.close()
			return nil, err
		}
	}
	if p.stop != nil && l.ch.next-1 != p.stop.Seq {
		l.close()
		return nil, &staleWatermark{fmt.Sprintf("it names seq %d, the log holds %d", p.stop.Seq, l.ch.next-1)}
	}
	l.segs = segs
	return l, nil
}

// cutAt returns the segments up to the one w names, which must be there.
func cutAt(segs []segment, w *watermark, from *Mark) ([]segment, error) {
	if from != nil && w.Seq < from.Seq {
		return nil, &staleWatermark{fmt.Sprintf("it names seq %d, before the mark's %d", w.Seq, from.Seq)}
	}
	if w.Seq == 0 {
		return segs[:0], nil
	}
	i := sort.Search(len(segs), func(i int) bool { return segs[i].first >= w.Segment })
	if i == len(segs) || segs[i].first != w.Segment {
		return nil, &staleWatermark{fmt.Sprintf("segment %s is not in the directory", segName(w.Segment))}
	}
	return segs[:i+1], nil
}

// loadSegment verifies segs[i] into l; atMark says it is the segment of
// the mark p goes on from.
func (j *Journal) loadSegment(l *loaded, p loadPlan, segs []segment, i int, atMark bool) error {
	seg := &segs[i]
	last := i == len(segs)-1
	path := filepath.Join(j.dir, seg.name)
	flag := os.O_RDONLY
	if last && !j.opts.ReadOnly {
		flag = os.O_RDWR
	}
	f, err := os.OpenFile(path, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("journal: open segment: %w", err)
	}
	s := &scanner{dir: j.dir, f: f, seg: seg, ch: &l.ch, mode: scanInner, hand: j.handFunc(&l.ch)}
	limit := int64(-1)
	switch {
	case last && p.stop != nil:
		limit = p.stop.End // durable: judged as any segment but the last
	case last && p.lenient:
		s.mode = scanLenient
	case last:
		s.mode = scanTail
	}
	if atMark {
		s.from = p.from.End
		err = verifyMarkFrame(j.dir, f, seg.name, p.from)
	}
	var t *tornTail
	if err == nil {
		t, err = s.scan(limit)
	}
	if err == nil && !last && seg.records == 0 {
		err = s.corrupt(0, "segment holds no records but is not the last")
	}
	if err != nil {
		f.Close()
		return err
	}
	if last && !j.opts.ReadOnly {
		l.seg, l.segPath = f, path
	} else {
		f.Close()
	}
	l.torn = t
	return nil
}

// skipToMark finds the segment of mark m in segs and fills what the
// segments before it hold from their names and sizes alone (they are not
// read), and what m's segment holds up to m. It returns m's segment's
// index.
func (j *Journal) skipToMark(m *Mark, segs []segment) (int, error) {
	i := sort.Search(len(segs), func(i int) bool { return segs[i].first >= m.Segment })
	if i == len(segs) || segs[i].first != m.Segment {
		return 0, markMismatch(j.dir, m, fmt.Sprintf("its segment %s is not in the directory", segName(m.Segment)))
	}
	if i+1 < len(segs) && segs[i+1].first <= m.Seq {
		return 0, markMismatch(j.dir, m, fmt.Sprintf("segment %s starts within the mark's segment", segs[i+1].name))
	}
	for k := range segs[:i] {
		fi, err := os.Lstat(filepath.Join(j.dir, segs[k].name))
		if err != nil {
			return 0, fmt.Errorf("journal: %w", err)
		}
		next := segs[k+1].first
		segs[k].size, segs[k].end = fi.Size(), fi.Size()
		segs[k].records, segs[k].last = next-segs[k].first, next-1
	}
	segs[i].records, segs[i].last, segs[i].end = m.Seq-m.Segment+1, m.Seq, m.End
	return i, nil
}

// adopt takes what a load found as the journal's durable and tail state.
func (j *Journal) adopt(l *loaded) {
	if t := l.torn; t != nil && j.opts.ReadOnly {
		j.log.Warn("journal: torn tail found (read-only: left in place)",
			"dir", j.dir, "segment", t.segment, "offset", t.offset, "bytes", len(t.data), "reason", t.reason)
		j.recoveries = append(j.recoveries, Recovery{Segment: t.segment, Offset: t.offset,
			Bytes: int64(len(t.data)), Reason: t.reason, State: RecoveryUnrepaired})
	}
	j.torn, j.evidence, j.tmps = l.torn, l.evidence, l.tmps
	j.seg, j.segPath = l.seg, l.segPath
	j.segs = l.segs
	ch := &l.ch
	j.lastSeq, j.head = ch.next-1, ch.prev
	j.owner, j.format, j.config, j.binding, j.rebinds = ch.owner, ch.format, ch.config, ch.binding, ch.rebinds
	j.segmentSize = j.opts.SegmentSize
	if ch.segSize != 0 {
		j.segmentSize = ch.segSize
	}
	j.tailSeq, j.tailHead, j.tailConfig = j.lastSeq, j.head, j.config
	if n := len(l.segs); n > 0 {
		last := l.segs[n-1]
		j.tailOff, j.tailSegSize, j.tailSeg, j.segFirst = last.end, last.size, last.first, last.first
	}
}

// loadReadOnly reads the log without the lock. While an owner runs it
// reads only what the owner's watermark says is durable; otherwise it
// verifies the whole log, then probes the lock again: an owner that
// started meanwhile may have been writing what the scan read, so the read
// is done again up to its watermark.
func (j *Journal) loadReadOnly() (*loaded, error) {
	if ownerRunning(j.dir) {
		return j.loadLive()
	}
	if readOnlyHook != nil {
		readOnlyHook("scan", false)
	}
	l, err := j.loadPlan(loadPlan{from: j.opts.From})
	var he *handError
	if errors.As(err, &he) {
		return nil, err
	}
	running := ownerRunning(j.dir)
	if readOnlyHook != nil {
		readOnlyHook("probed-again", running)
	}
	if !running {
		return l, err
	}
	l.close()
	l, err = j.loadLive()
	if err == nil && l.ch.next-1 < j.handed.seq {
		err = fmt.Errorf("journal: %s: its owner started while it was read, and OnRecord was given records up to seq %d, past the durable end at seq %d; open it again",
			j.dir, j.handed.seq, l.ch.next-1)
	}
	return l, err
}

// loadLive reads a log whose owner runs: up to its watermark, or, when
// there is no watermark the log bears out, leniently (a bad frame in the
// last segment ends the read, judged nothing).
func (j *Journal) loadLive() (*loaded, error) {
	if w, ok := readWatermark(j.dir); ok {
		l, err := j.loadPlan(loadPlan{from: j.opts.From, stop: &w})
		var he *handError
		if err == nil || errors.Is(err, ErrMarkMismatch) || errors.As(err, &he) {
			return l, err
		}
		j.log.Debug("journal: the live journal's watermark is not usable; reading it without one", "dir", j.dir, "err", err)
	} else {
		j.log.Debug("journal: the live journal has no watermark; reading it without one", "dir", j.dir)
	}
	return j.loadPlan(loadPlan{from: j.opts.From, lenient: true})
}

// handed is what OnRecord was given so far by this Open: the last seq and
// its payload's hash, and whether the owner and format were checked.
type handed struct {
	seq     uint64
	head    [hashSize]byte
	checked bool
}

// handFunc returns what a scan calls with each record it verified: the
// owner's OnRecord, behind a check of the owner and format (so that a log
// of another owner is refused as such, not handed over), skipping what an
// earlier attempt of this Open already handed. nil without OnRecord.
func (j *Journal) handFunc(ch *chain) func(*Record) error {
	on := j.opts.OnRecord
	if on == nil {
		return nil
	}
	h := &j.handed
	return func(r *Record) error {
		if !h.checked {
			if err := j.bindingError(j.ownerProblem(ch.owner, ch.format)); err != nil {
				return err
			}
			h.checked = true
		}
		if r.Seq <= h.seq {
			if r.Seq == h.seq && ch.prev != h.head {
				return fmt.Errorf("journal: %s: record %d changed while it was read (its owner started meanwhile); open it again", j.dir, r.Seq)
			}
			return nil
		}
		if err := on(*r); err != nil {
			return &handError{err}
		}
		h.seq, h.head = r.Seq, ch.prev
		return nil
	}
}
