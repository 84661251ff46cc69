package operator

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stewardrt/steward/systemd"
)

// mainEnv makes this test binary, re-executed, the steward-operator command
// with the hooks its cmd main passes, instead of the tests.
const mainEnv = "STEWARD_OPERATOR_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		cli := &CLI{Stdout: os.Stdout, Stderr: os.Stderr,
			Ready: systemd.Ready, Watchdog: systemd.StartWatchdog, Stopping: systemd.Stopping}
		os.Exit(cli.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// syncBuffer is a child's stderr, written by exec's copying goroutine while
// a test reads it.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	written chan struct{} // closed and replaced at every write
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written != nil {
		close(s.written)
		s.written = nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits, at most timeout, until the buffer holds want.
func (s *syncBuffer) waitFor(t *testing.T, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		if strings.Contains(s.b.String(), want) {
			s.mu.Unlock()
			return
		}
		if s.written == nil {
			s.written = make(chan struct{})
		}
		ch := s.written
		s.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("%q not written within %v:\n%s", want, timeout, s.String())
		}
	}
}
