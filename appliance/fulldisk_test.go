package appliance

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stewardrt/steward/internal/testenv"
)

// TestFullDiskWhileServing: an appliance on a small tmpfs answers until
// the disk is full, then refuses what it cannot journal (500: the answer
// is not journaled, so the same requestId may run again later) while its
// snapshots fail, and with room again it answers and snapshots as before,
// and every answer it gave replays byte for byte, also after a restart: a
// full disk never stops it (the history index keeps what a failed write
// held).
func TestFullDiskWhileServing(t *testing.T) {
	disk := testenv.SmallTmpfs(t, 2<<20)
	cfg := Config{State: filepath.Join(disk, "state"), Socket: filepath.Join(shortDir(t), "a.sock"), SnapshotEvery: 8, JournalSegmentSize: 16 << 10}
	a := startApp(t, cfg)
	answers := map[string][]byte{}
	call := func(a *app, i int) (int, []byte) {
		return a.invoke(fmt.Sprintf("r%d", i), "text.sha256", fmt.Sprintf(`{"text":"%d"}`, i))
	}
	for i := range 20 {
		code, body := call(a, i)
		if code != http.StatusOK {
			t.Fatalf("call %d before the disk filled: %d", i, code)
		}
		answers[fmt.Sprintf("r%d", i)] = body
	}
	filler := testenv.FillDisk(t, filepath.Join(disk, "filler"))
	refused, snapFailed := 0, 0
	for i := 20; i < 400; i++ {
		switch code, body := call(a, i); code {
		case http.StatusOK:
			answers[fmt.Sprintf("r%d", i)] = body
		case http.StatusInternalServerError:
			refused++
		default:
			t.Fatalf("call %d on the full disk: %d", i, code)
		}
		if _, err := a.srv.store.snapshot(); err != nil {
			snapFailed++
		}
	}
	if refused == 0 || snapFailed == 0 {
		t.Fatalf("400 calls on a full disk: %d refused, %d snapshots failed: the disk was not full", refused, snapFailed)
	}
	select {
	case <-a.srv.store.faults.ch:
		t.Fatalf("the full disk stopped the appliance: %v", a.srv.store.faults.err)
	default:
	}
	filler.Close()
	if err := os.Remove(filler.Name()); err != nil {
		t.Fatal(err)
	}
	for i := 400; i < 420; i++ {
		code, body := call(a, i)
		if code != http.StatusOK {
			t.Fatalf("call %d with room again: %d", i, code)
		}
		answers[fmt.Sprintf("r%d", i)] = body
	}
	if _, err := a.srv.store.snapshot(); err != nil {
		t.Fatalf("a snapshot with room again: %v", err)
	}
	a.close()
	b := startApp(t, cfg)
	for id, want := range answers {
		var n int
		fmt.Sscanf(id, "r%d", &n)
		if code, body := call(b, n); code != http.StatusOK || !bytes.Equal(body, want) {
			t.Fatalf("%s after the restart: %d %q, want %q", id, code, body, want)
		}
	}
	t.Logf("%d calls refused and %d snapshots failed on the full disk; %d answers replay after a restart", refused, snapFailed, len(answers))
}
