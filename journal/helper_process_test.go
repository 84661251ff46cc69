package journal

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// helperDeadline bounds how long a parent waits for its child; it is a
// failure deadline, never a pacing sleep.
const helperDeadline = 2 * time.Minute

// TestHelperProcess is not a test: it is the child process of the crash and
// lock tests, run by re-executing the test binary with JOURNAL_HELPER set.
func TestHelperProcess(t *testing.T) {
	switch os.Getenv("JOURNAL_HELPER") {
	case "":
		t.Skip("child process of the crash and lock tests; runs only when they re-execute the test binary")
	case "append":
		helperAppend()
	case "lock":
		helperLock()
	default:
		fmt.Println("error unknown helper mode")
	}
}

func envInt(name string) int64 {
	n, err := strconv.ParseInt(os.Getenv(name), 10, 64)
	if err != nil {
		fmt.Printf("error %s: %v\n", name, err)
		os.Exit(2)
	}
	return n
}

// helperAppend appends from JOURNAL_WRITERS goroutines forever, printing
// "ack <seq>" for every acknowledged append. With JOURNAL_CRASH_AT set it
// SIGKILLs itself at that crash point once JOURNAL_CRASH_AFTER appends have
// been acknowledged (and printed).
func helperAppend() {
	dir := os.Getenv("JOURNAL_DIR")
	writers := envInt("JOURNAL_WRITERS")
	opts := testOptions()
	opts.SegmentSize = envInt("JOURNAL_SEGMENT_SIZE")
	var acks atomic.Int64
	if at := os.Getenv("JOURNAL_CRASH_AT"); at != "" {
		after := envInt("JOURNAL_CRASH_AFTER")
		crashHook = func(point string) {
			if point == at && acks.Load() >= after {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // SIGKILL is delivered before this returns
			}
		}
	}
	j, err := Open(dir, opts)
	if err != nil {
		fmt.Printf("error open: %v\n", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	for g := range writers {
		go func() {
			for i := 0; ; i++ {
				seq, err := j.Append("tick", tick{N: i, Note: strconv.FormatInt(g, 10)})
				mu.Lock()
				if err != nil {
					fmt.Printf("error append: %v\n", err)
					os.Exit(3)
				}
				fmt.Printf("ack %d\n", seq)
				acks.Add(1)
				mu.Unlock()
			}
		}()
	}
	select {}
}

// helperLock tries to open JOURNAL_DIR and prints the outcome.
func helperLock() {
	dir := os.Getenv("JOURNAL_DIR")
	j, err := Open(dir, testOptions())
	switch {
	case errors.Is(err, ErrLocked):
		fmt.Printf("locked %v\n", err)
	case err != nil:
		fmt.Printf("error %v\n", err)
	default:
		fmt.Println("opened")
		j.Close()
	}
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

// firstLine returns the first stdout line with one of the prefixes.
func (c *child) firstLine(t *testing.T, prefixes ...string) string {
	t.Helper()
	deadline := time.NewTimer(helperDeadline)
	defer deadline.Stop()
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited without a %v line; stderr:\n%s", prefixes, c.stderr)
			}
			for _, p := range prefixes {
				if strings.HasPrefix(line, p) {
					return line
				}
			}
		case <-deadline.C:
			t.Fatalf("no %v line from the child within %v", prefixes, helperDeadline)
		}
	}
}
