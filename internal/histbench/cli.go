package histbench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const usage = `usage:
  histgen generate --dir GEN --bin BIN [--points 0,100000] [--clients 32] [--day-calls 50000]
  histgen measure --dir GEN --bin BIN [--before-dir GEN0 --before-bin BIN0] [--back]
                  [--points P,... (default: all)] [--starts 3] [--idle 2s] [--json FILE]
  histgen table --dir GEN [--before-dir GEN0] --json FILE
  histgen daemon host|controller ...

BIN holds steward-operator, steward-controller, steward-appliance and
steward-dev (go build -o BIN/ ./cmd/...). generate fills GEN/state with the
calls and keeps each point in GEN/points/N; measure starts each daemon on
copies of them and prints the table (docs/HISTORY.md); with --before-dir
and --before-bin, it measures that generation with those commands too
("before"; GEN with BIN is "after"), start for start in turn. --back adds
a start a snapshot back (the newest snapshot removed) where there are
snapshots. table prints the tables again from measure's --json FILE.
`

// Main is the histgen command (its main only calls it): the exit status
// is 0 done, 1 failed, 2 usage.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if args[0] == "daemon" {
		return Daemon(args[1:], stdin, stdout, stderr)
	}
	fs := flag.NewFlagSet("histgen "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("dir", "", "")
	bin := fs.String("bin", "", "")
	points := fs.String("points", "", "")
	clients := fs.Int("clients", 32, "")
	dayCalls := fs.Int("day-calls", 50_000, "")
	starts := fs.Int("starts", 3, "")
	idle := fs.Duration("idle", 2*time.Second, "")
	jsonOut := fs.String("json", "", "")
	beforeDir := fs.String("before-dir", "", "")
	beforeBin := fs.String("before-bin", "", "")
	back := fs.Bool("back", false, "")
	needBin := args[0] != "table" // table starts nothing
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 || *dir == "" || (needBin && *bin == "") {
		fmt.Fprintf(stderr, "histgen: %v\n%s", errors.Join(err, errors.New("--dir and --bin are needed, and no argument")), usage)
		return 2
	}
	if *points == "" && args[0] == "generate" {
		*points = "0,100000"
	}
	pts, err := ParsePoints(*points)
	if err != nil {
		fmt.Fprintf(stderr, "histgen: --points: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	bins := BinsIn(*bin)
	switch args[0] {
	case "generate":
		_, err = Generate(ctx, GenOptions{Dir: *dir, Appliance: bins.Appliance, Points: pts, Clients: *clients,
			DayCalls: *dayCalls, Log: stderr})
	case "measure":
		if (*beforeDir == "") != (*beforeBin == "") {
			fmt.Fprintf(stderr, "histgen: --before-dir and --before-bin go together\n%s", usage)
			return 2
		}
		err = measureCommand(ctx, sidesOf(*dir, bins, *beforeDir, BinsIn(*beforeBin)), MeasureOptions{Points: pts, Starts: *starts, Idle: *idle, Back: *back, Log: stderr},
			*jsonOut, stdout)
	case "table":
		err = tableCommand(sidesOf(*dir, bins, *beforeDir, BinsIn(*beforeBin)), *jsonOut, stdout)
	default:
		fmt.Fprintf(stderr, "histgen: unknown command %q\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "histgen %s: %v\n", args[0], oneLine(err))
		return 1
	}
	return 0
}

// sidesOf is GEN with BIN alone, or "before" (beforeDir with before)
// and "after" (GEN with BIN) when beforeDir is set.
func sidesOf(dir string, bins Bins, beforeDir string, before Bins) []Side {
	if beforeDir == "" {
		return []Side{{Dir: dir, Bins: bins}}
	}
	return []Side{{Name: "before", Dir: beforeDir, Bins: before}, {Name: "after", Dir: dir, Bins: bins}}
}

// readMetas reads each side's meta.json.
func readMetas(sides []Side) error {
	for i := range sides {
		m, err := ReadMeta(sides[i].Dir)
		if err != nil {
			return err
		}
		sides[i].Meta = m
	}
	return nil
}

// tableCommand prints the tables of results measure wrote to jsonIn.
func tableCommand(sides []Side, jsonIn string, stdout io.Writer) error {
	if jsonIn == "" {
		return errors.New("--json FILE: the results to print")
	}
	if err := readMetas(sides); err != nil {
		return err
	}
	b, err := os.ReadFile(jsonIn)
	if err != nil {
		return err
	}
	var res Results
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("%s: %w", jsonIn, err)
	}
	WriteTable(stdout, sides, &res)
	return nil
}

func measureCommand(ctx context.Context, sides []Side, opts MeasureOptions, jsonOut string, stdout io.Writer) error {
	if err := readMetas(sides); err != nil {
		return err
	}
	res, err := Measure(ctx, opts, sides)
	if err != nil {
		return err
	}
	WriteTable(stdout, sides, res)
	if jsonOut == "" {
		return nil
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(jsonOut, append(b, '\n'), 0o644)
}

// ParsePoints reads a comma-separated list of call counts; "1M" and
// "100k" are read as 1,000,000 and 100,000.
func ParsePoints(s string) ([]int, error) {
	var out []int
	if s == "" {
		return nil, nil
	}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mul := 1
		switch {
		case strings.HasSuffix(f, "M"):
			f, mul = strings.TrimSuffix(f, "M"), 1_000_000
		case strings.HasSuffix(f, "k"):
			f, mul = strings.TrimSuffix(f, "k"), 1_000
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a number of calls", f)
		}
		out = append(out, n*mul)
	}
	return out, nil
}

// Bins are the commands the measurement starts.
type Bins struct {
	Operator, Controller, Appliance, Dev string
}

// BinsIn are the commands in directory dir.
func BinsIn(dir string) Bins {
	return Bins{Operator: filepath.Join(dir, "steward-operator"), Controller: filepath.Join(dir, "steward-controller"),
		Appliance: filepath.Join(dir, "steward-appliance"), Dev: filepath.Join(dir, "steward-dev")}
}
