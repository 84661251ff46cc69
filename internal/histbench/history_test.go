package histbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/testenv"
)

// CI runs TestHistory at 100,000 calls (points 0, 50,000 and 100,000), the
// point P2.2 asks of CI: with every daemon's history the generator makes
// 500 to 900 calls a second here, so the generation takes 2 to 4 minutes.
// STEWARD_HISTORY_CALLS (or -history.calls) runs another point (20,000
// for a quick run);
// the 1M point and the figures of docs/HISTORY.md are
//
//	go test ./internal/histbench -run TestHistory -history.calls=1000000 \
//	    -history.points=0,10000,100000,1000000 -history.starts=3 -history.back \
//	    -history.dir=/var/tmp/hist -timeout 0 -v
//
// A -history.dir that holds a generation of the points is measured again
// without generating; one that holds a prefix of them is grown.
var (
	historyCalls   = flag.Int("history.calls", envInt("STEWARD_HISTORY_CALLS", 100_000), "bulk calls to generate (default $STEWARD_HISTORY_CALLS, else 100000)")
	historyPoints  = flag.String("history.points", "", "the points kept and measured, comma-separated (default 0, half of history.calls and history.calls)")
	historyDir     = flag.String("history.dir", "", "where the generation is made, or reused (default: a temporary directory, removed)")
	historyStarts  = flag.Int("history.starts", 1, "starts of each daemon at each point")
	historyBack    = flag.Bool("history.back", true, "also start each daemon a snapshot back (its newest snapshot removed)")
	historyClients = flag.Int("history.clients", 32, "concurrent MCP sessions of the generator")
	historyIdle    = flag.Duration("history.idle", 2*time.Second, "how long after its short load a daemon's memory is read again")
	historyOut     = flag.String("history.out", "", "write the tables to FILE and the results to FILE.json")
)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// TestHistory generates the history and measures each daemon's start on
// it. It prints the figures and asserts nothing about speed: it asserts
// that the generation holds every record kind it should, that each daemon
// started on each point and answered the oldest requestId as recorded,
// and that each daemon with history loaded a snapshot and replayed at
// most a snapshot interval of records, at every point (checkBounded).
func TestHistory(t *testing.T) {
	points := []int{0, *historyCalls / 2, *historyCalls}
	if *historyPoints != "" {
		var err error
		if points, err = ParsePoints(*historyPoints); err != nil {
			t.Fatalf("-history.points: %v", err)
		}
	}
	bin := buildCommands(t)
	gen := *historyDir
	if gen == "" {
		gen = t.TempDir()
	}
	args := []string{"generate", "--dir", gen, "--bin", bin, "--points", joinInts(points), "--clients", strconv.Itoa(*historyClients)}
	runLogged(t, filepath.Join(bin, "histgen"), args...)
	meta, err := ReadMeta(gen)
	if err != nil {
		t.Fatal(err)
	}
	if points[len(points)-1] >= MinVarietyCalls {
		if err := CheckKinds(meta); err != nil {
			t.Error(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sides := []Side{{Dir: gen, Bins: BinsIn(bin), Meta: meta}}
	res, err := Measure(ctx, MeasureOptions{Points: points, Starts: *historyStarts, Back: *historyBack,
		Idle: *historyIdle, Log: testLog{t}}, sides)
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	WriteTable(&table, sides, res)
	t.Logf("figures (speed is measured here, never asserted):\n%s", table.String())
	for _, err := range checkBounded(meta, res) {
		t.Error(err)
	}
	if *historyOut != "" {
		b, _ := json.MarshalIndent(struct {
			Meta    *Meta    `json:"meta"`
			Results *Results `json:"results"`
		}{meta, res}, "", "  ")
		if err := os.WriteFile(*historyOut, table.Bytes(), 0o644); err != nil {
			t.Error(err)
		}
		if err := os.WriteFile(*historyOut+".json", append(b, '\n'), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// buildCommands builds the four commands and histgen with `go build`
// (never with -race: their figures are the daemons' own), into a
// temporary directory.
func buildCommands(t *testing.T) string {
	gobin, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "the go command builds the daemons: %v", err)
	}
	dir := t.TempDir()
	cmd := exec.Command(gobin, "build", "-o", dir+"/",
		"github.com/stewardrt/steward/cmd/steward-operator", "github.com/stewardrt/steward/cmd/steward-controller",
		"github.com/stewardrt/steward/cmd/steward-appliance", "github.com/stewardrt/steward/cmd/steward-dev",
		"github.com/stewardrt/steward/internal/histbench/cmd/histgen")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// runLogged runs a command to its end, logging each line of its stderr.
func runLogged(t *testing.T, bin string, args ...string) {
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	var last string
	for sc.Scan() {
		last = sc.Text()
		t.Log(last)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s %s: %v: %s", filepath.Base(bin), strings.Join(args, " "), err, last)
	}
}

func joinInts(v []int) string {
	var s []string
	for _, n := range v {
		s = append(s, strconv.Itoa(n))
	}
	return strings.Join(s, ",")
}

// testLog is the measurement's progress in the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
