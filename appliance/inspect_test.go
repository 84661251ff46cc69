package appliance

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestInspectLiveJournal: `steward-appliance inspect` reads the journal
// of an appliance serving in another process, while calls are being
// journaled, and every time reports what is durable, never damage; once
// the appliance stopped (its snapshot) it reads from the snapshot and
// replays nothing.
func TestInspectLiveJournal(t *testing.T) {
	dir := shortDir(t)
	sock, state := filepath.Join(dir, "a.sock"), filepath.Join(dir, "state")
	c := startChild(t, sock, state)
	stop, inspected := make(chan struct{}), make(chan int)
	go func() {
		n, last := 0, uint64(0)
		defer func() { inspected <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			var stdout, stderr bytes.Buffer
			if code := Main([]string{"inspect", "--state", state}, &stdout, &stderr); code != 0 || stderr.Len() != 0 {
				t.Errorf("inspect of a live journal: exit %d\nstdout: %s\nstderr: %s", code, &stdout, &stderr)
				return
			}
			var records, replayed, answers uint64
			if _, err := fmt.Sscanf(stdout.String(), "journal "+journalDir(state)+": %d records\nno snapshot: replayed all %d records\nanswers %d\n",
				&records, &replayed, &answers); err != nil || records < last || replayed != records || answers != records-1 {
				t.Errorf("inspect of a live journal (%v):\n%s", err, &stdout)
				return
			}
			n, last = n+1, records
		}
	}()
	childCalls(t, sock, 0, 40)
	close(stop)
	t.Logf("%d inspections while 40 calls were journaled", <-inspected)
	c.stop(t)
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"inspect", "--state", state}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, &stderr)
	}
	want := fmt.Sprintf("journal %s: 41 records\nsnapshot 0000000000000041.snap (record 41): replayed 0 records after it\nanswers 40\n", journalDir(state))
	if stdout.String() != want || !strings.Contains(want, "snapshot") {
		t.Fatalf("inspect after the stop:\n%s\nwant\n%s", &stdout, want)
	}
}
