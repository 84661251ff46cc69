package index

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/stewardrt/steward/journal"
)

// helperDeadline bounds how long a parent waits for its child; it is a
// failure deadline, never a pacing sleep.
const helperDeadline = 2 * time.Minute

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// quiet is a logger for tests that discards.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// open opens an index at a fresh path under t.TempDir.
func open(t testing.TB) (*Index, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idx", "history.db")
	x, err := Open(path, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x, path
}

// reopen opens path, failing the test on an error.
func reopen(t testing.TB, path string) *Index {
	t.Helper()
	x, err := Open(path, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// inFile reads key from the file alone, not from what is held.
func inFile(t testing.TB, x *Index, bucket string, key []byte) ([]byte, bool) {
	t.Helper()
	var out []byte
	err := x.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte(bucket)); b != nil {
			out = bytes.Clone(b.Get(key))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, out != nil
}

// check runs bbolt's consistency check over the whole file.
func check(t testing.TB, x *Index) {
	t.Helper()
	err := x.db.View(func(tx *bolt.Tx) error {
		var first error
		for err := range tx.Check() { // drained whole: Check reads in a goroutine of its own
			if first == nil {
				first = err
			}
		}
		return first
	})
	if err != nil {
		t.Fatalf("bbolt check of %s: %v", x.path, err)
	}
}

// wantErr fails unless err's text is exactly want.
func wantErr(t testing.TB, err error, want string) {
	t.Helper()
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant      %s", err, want)
	}
}

// TestHelperProcess is not a test: it is the child process of the crash
// tests, run by re-executing the test binary with INDEX_HELPER set.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv("INDEX_HELPER")
	if mode == "" {
		t.Skip("child process of the crash tests; runs only when they re-execute the test binary")
	}
	if mode == "lock" {
		x, err := Open(os.Getenv("INDEX_PATH"), Options{Logger: quiet, LockTimeout: 20 * time.Millisecond})
		if err != nil {
			fmt.Printf("refused %v\n", err)
			os.Exit(0)
		}
		x.Close()
		fmt.Println("opened")
		os.Exit(0)
	}
	x, err := Open(os.Getenv("INDEX_PATH"), Options{Logger: quiet})
	if err != nil {
		fmt.Printf("error open: %v\n", err)
		os.Exit(2)
	}
	n, _ := strconv.Atoi(os.Getenv("INDEX_N"))
	switch mode {
	case "sync", "flush":
		helperPutN(x, 0, n)
		if mode == "sync" {
			must(x.SetMeta("mark", SeqKey(uint64(n))))
			must(x.Sync())
		} else {
			must(x.Flush())
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	case "flush-loop":
		for round := 0; ; round++ {
			helperPutN(x, round*n, n)
			must(x.Flush())
			fmt.Printf("flushed %d\n", (round+1)*n)
		}
	}
	fmt.Println("error unknown helper mode")
	os.Exit(2)
}

// helperPutN puts keys from to from+n-1 in bucket "b".
func helperPutN(x *Index, from, n int) {
	for i := from; i < from+n; i++ {
		must(x.Put("b", SeqKey(uint64(i)), value(i)))
	}
}

func must(err error) {
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(3)
	}
}

// placeOf is the test place of entry i.
func placeOf(i int) journal.Place {
	return journal.Place{Seq: uint64(i + 1), Segment: 1, Offset: int64(i) * 100}
}

// value is the test value of entry i: an encoded place.
func value(i int) []byte {
	return EncodePlace(placeOf(i))
}

// child is a running helper process and its stdout lines.
type child struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *bytes.Buffer
}

func startHelper(t *testing.T, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	c := &child{cmd: cmd, lines: make(chan string, 4096), stderr: &bytes.Buffer{}}
	cmd.Stderr = c.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return c
}

// line returns the next stdout line, failing on an "error" line, on the
// child's exit or past the deadline.
func (c *child) line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			t.Fatalf("child exited without a line; stderr:\n%s", c.stderr)
		}
		if strings.HasPrefix(l, "error") {
			t.Fatalf("child: %s", l)
		}
		return l
	case <-time.After(helperDeadline):
		t.Fatalf("no line from the child within %v", helperDeadline)
	}
	return ""
}

// waitKilled waits for the child and fails unless SIGKILL ended it.
func (c *child) waitKilled(t *testing.T) {
	t.Helper()
	for l := range c.lines {
		if strings.HasPrefix(l, "error") {
			t.Fatalf("child: %s", l)
		}
	}
	err := c.cmd.Wait()
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want SIGKILL; stderr:\n%s", err, c.stderr)
	}
}
