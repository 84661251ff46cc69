package peertest

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// SyncBuffer is a log or a child's stderr, written by another goroutine
// (exec's copying one, a logger's) while a test reads it.
type SyncBuffer struct {
	mu      sync.Mutex // guards the fields that follow
	b       bytes.Buffer
	written chan struct{} // closed and replaced at every write
}

// Write appends p and wakes a WaitFor.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written != nil {
		close(s.written)
		s.written = nil
	}
	return s.b.Write(p)
}

// String is what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// WaitFor waits, at most timeout, until the buffer holds want.
func (s *SyncBuffer) WaitFor(t *testing.T, want string, timeout time.Duration) {
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
