package snapshot

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/journal"
)

const testFormat = "steward-test-snapshot-v1"

// testKey is a fixed ed25519 key: the tests' operator key.
var testKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))

func sign(digest []byte) ([]byte, error) { return ed25519.Sign(testKey, digest), nil }

// verify accepts only a signature of testKey over the digest.
func verify(_ Snapshot, digest, sig []byte) error {
	if sig == nil {
		return errors.New("unsigned")
	}
	if !ed25519.Verify(testKey.Public().(ed25519.PublicKey), digest, sig) {
		return errors.New("not the operator key's signature")
	}
	return nil
}

// mark is a test mark at seq.
func mark(seq uint64) journal.Mark {
	head := sha256.Sum256([]byte(strconv.FormatUint(seq, 10)))
	return journal.Mark{
		Seq: seq, Head: head[:], Segment: 1, End: int64(seq) * 100,
		Owner: "test", Format: "test-journal", Config: []byte(`{}`),
		Binding: bytes.Repeat([]byte{1}, 32), SegmentSize: 64 << 20,
	}
}

// snap is a test snapshot at seq.
func snap(seq uint64) Snapshot {
	return Snapshot{Format: testFormat, Version: 1, Mark: mark(seq), State: []byte("state at " + strconv.FormatUint(seq, 10))}
}

// write writes snap(seq), signed, failing the test on an error.
func write(t testing.TB, dir string, seq uint64) Written {
	t.Helper()
	w, err := Write(dir, snap(seq), sign)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// names lists dir's file names, sorted.
func names(t testing.TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	slices.Sort(out)
	return out
}

// wantErr fails unless err's text is exactly want.
func wantErr(t testing.TB, err error, want string) {
	t.Helper()
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant      %s", err, want)
	}
}

// TestHelperProcess is not a test: it is the child of the crash tests,
// run by re-executing the test binary with SNAPSHOT_HELPER set (and the
// failpoint armed in its environment). It writes snapshot
// SNAPSHOT_SEQ to SNAPSHOT_DIR.
func TestHelperProcess(t *testing.T) {
	if os.Getenv("SNAPSHOT_HELPER") == "" {
		t.Skip("child process of the crash tests; runs only when they re-execute the test binary")
	}
	seq, _ := strconv.ParseUint(os.Getenv("SNAPSHOT_SEQ"), 10, 64)
	if _, err := Write(os.Getenv("SNAPSHOT_DIR"), snap(seq), sign); err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(2)
	}
	fmt.Println("written")
	os.Exit(0)
}

// runHelper writes snapshot seq to dir in a child with failpoint fp
// armed and returns whether SIGKILL ended it.
func runHelper(t *testing.T, dir string, seq uint64, fp string) (killed bool, out string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SNAPSHOT_HELPER=1", "SNAPSHOT_DIR="+dir,
		"SNAPSHOT_SEQ="+strconv.FormatUint(seq, 10), failpoint.Env+"="+fp)
	b, err := cmd.CombinedOutput()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		return true, string(b)
	}
	if err != nil {
		t.Fatalf("child: %v\n%s", err, b)
	}
	return false, string(b)
}

// tempsIn returns dir's temporaries.
func tempsIn(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	for _, n := range names(t, dir) {
		if isTemp(n) {
			out = append(out, n)
		}
	}
	return out
}

// fileOf is the path of snapshot seq in dir.
func fileOf(dir string, seq uint64) string { return filepath.Join(dir, Name(seq)) }
