package dev

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stewardrt/steward/journal"
)

// updateGolden makes TestWriteGoldenJournals write the golden journals:
//
//	go test ./dev -run TestWriteGoldenJournals -update-golden
var updateGolden = flag.Bool("update-golden", false, "write journal/testdata/golden/"+goldenVersion+" from a real run of the dev stack")

// goldenVersion names the journal formats the generator writes today. A
// directory of golden journals is the evidence of the format it was made
// in and is never written again: a deliberate format change bumps this
// name, and the tests of the old directory keep reading the old records.
//
//	v1  the formats before the segment size was recorded
//	v2  the bind record records the segment size (JournalSegmentSize here)
const goldenVersion = "v2"

// goldenDir is where the golden journals of goldenVersion go.
var goldenDir = filepath.Join("..", "journal", "testdata", "golden", goldenVersion)

// TestWriteGoldenJournals writes a golden journal of each format, made by
// the real code of the three parts: two runs of the dev stack with --once
// (provisioning: controller, purse, grant, route; then per run one charged
// call and its replay, and a restart of every journal between them). Each
// segment is cut to its records (a segment is preallocated to 64 MiB); the
// journal opens such a segment as it is. It copies, under goldenDir:
//
//	host/operator.pub                     the operator's public key (store open)
//	host/journal/*.seg                    the host journal
//	controller/journal/*.seg              the controller journal
//	appliance/journal/*.seg               the reference appliance's journal
//
// The private keys stay behind: the readers need none of them.
func TestWriteGoldenJournals(t *testing.T) {
	if !*updateGolden {
		t.Skip("writes the golden journals only with -update-golden")
	}
	if _, err := os.Stat(goldenDir); err == nil {
		t.Fatalf("%s exists: it is the evidence of the %s formats and is not written again; bump goldenVersion for a new format, or remove it by hand to remake it", goldenDir, goldenVersion)
	}
	state := filepath.Join(t.TempDir(), "s")
	for i := 0; i < 2; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := Run(ctx, Options{State: state, Once: true, Stdout: io.Discard, Logger: quietLogger()})
		cancel()
		if err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
	}
	l, err := NewLayout(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(goldenDir, "host"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(filepath.Join(l.OperatorStore, "operator.pub"), filepath.Join(goldenDir, "host", "operator.pub")); err != nil {
		t.Fatal(err)
	}
	for _, j := range []struct{ from, to string }{
		{filepath.Join(l.OperatorStore, "journal"), filepath.Join(goldenDir, "host", "journal")},
		{filepath.Join(l.Controller, "journal"), filepath.Join(goldenDir, "controller", "journal")},
		{filepath.Join(l.Appliance, "journal"), filepath.Join(goldenDir, "appliance", "journal")},
	} {
		if err := copyRecords(j.from, j.to); err != nil {
			t.Fatal(err)
		}
	}
}

// copyRecords copies the segments of the journal in from into to, each cut
// to the end of its last record.
func copyRecords(from, to string) error {
	sum, err := journal.Inspect(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	for _, s := range sum.Segments {
		b, err := os.ReadFile(filepath.Join(from, s.Name))
		if err != nil {
			return err
		}
		if s.Used > int64(len(b)) {
			return fmt.Errorf("%s: %d bytes used of %d", s.Name, s.Used, len(b))
		}
		if err := os.WriteFile(filepath.Join(to, s.Name), b[:s.Used], 0o644); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}
