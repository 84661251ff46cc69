package histbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/stewardrt/steward/dev"
	"github.com/stewardrt/steward/wire/msg"
)

// readOf is what process pid has read so far (/proc/PID/io rchar): every
// byte read(2), pread(2) and the like returned, from the page cache or
// not; not what mmap maps (the binary, bbolt's file).
func readOf(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/io has no rchar", pid)
}

// The start lines of the daemons with history: the host's "serving" and
// the appliance's "history opened" say which snapshot they loaded and how
// many records they replayed after it (slog's text form).
var (
	replayedRe = regexp.MustCompile(`\breplayed=(\d+)`)
	snapshotRe = regexp.MustCompile(`\bsnapshot=("[^"]*"|\S*)`)
)

// loadedIn reads a daemon's log from offset from (this start's part):
// the snapshot it loaded and the records it replayed after it, or -1
// when it said nothing of them.
func loadedIn(log string, from int64) (snapshot string, replayed int64, err error) {
	f, err := os.Open(log)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, from, 1<<30))
	if err != nil {
		return "", 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		m := replayedRe.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		n, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			return "", 0, err
		}
		if s := snapshotRe.FindStringSubmatch(l); s != nil {
			snapshot = strings.Trim(s[1], `"`)
		}
		return snapshot, n, nil
	}
	return "", -1, nil
}

// dropNewestSnapshot removes the newest snapshot of the daemon whose
// state is part (part/snapshots, files named by their mark's sequence
// number), if it has any.
func dropNewestSnapshot(part string) error {
	dir := filepath.Join(part, "snapshots")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var snaps []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".snap") {
			snaps = append(snaps, e.Name())
		}
	}
	if len(snaps) == 0 {
		return nil
	}
	slices.Sort(snaps)
	return os.Remove(filepath.Join(dir, snaps[len(snaps)-1]))
}

// hasSnapshots reports whether the daemon has snapshots at the point;
// for steward-dev, whether any of its parts has.
func (p *GenPoint) hasSnapshots(daemon string) bool {
	for name, d := range p.Disk {
		if d.Snapshots > 0 && (name == daemon || daemon == "steward-dev") {
			return true
		}
	}
	return false
}

// loadCalls is the short load of a start of steward-dev: new calls
// (calls n+1.. of ordinary kinds) from loadSessions MCP sessions, each
// of which must be answered definite 200 and charged (not replayed).
const (
	loadCalls    = 500
	loadSessions = 8
)

// loadDev makes the loadCalls on the steward-dev of layout l, started on
// a point of n calls.
func loadDev(ctx context.Context, l dev.Layout, n int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, loadSessions)
	for s := range loadSessions {
		m, err := dialMCP(ctx, l.MCPSocket)
		if err != nil {
			return err
		}
		defer m.Close()
		c := &caller{mcp: m, fg: l.ForegroundSocket, uid: uint32(os.Getuid())}
		wg.Go(func() {
			for i := n + 1 + s; i <= n+loadCalls && ctx.Err() == nil; i += loadSessions {
				if errs[s] = loadCall(ctx, c, i); errs[s] != nil {
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// loadCall makes the i-th call of the load: the ordinary rotation of
// bulk, a new requestId.
func loadCall(ctx context.Context, c *caller, i int) error {
	ops := []struct {
		op   string
		args map[string]any
	}{
		{"calc.evaluate", map[string]any{"expression": strconv.Itoa(i) + " * 687 / 365.25"}},
		{"units.convert", map[string]any{"value": strconv.Itoa(i), "from": "km", "to": "mi"}},
		{"text.sha256", map[string]any{"text": "call " + strconv.Itoa(i)}},
	}
	k := ops[i%3]
	o, raw, err := c.do(ctx, invoke("load", i, k.op, k.args))
	if err != nil {
		return fmt.Errorf("call %d: %w", i, err)
	}
	if o.Outcome != msg.StateDefinite || o.Status != 200 || o.Replayed {
		return fmt.Errorf("call %d ended %s %d replayed=%v: %.300s", i, o.Outcome, o.Status, o.Replayed, raw)
	}
	return nil
}
