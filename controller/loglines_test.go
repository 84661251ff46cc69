package controller

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
)

// logLines is a log sink that a test waits on: every line written is
// kept, and a waiter is woken by the first line that holds all of its
// words (no polling, no sleep).
type logLines struct {
	mu      sync.Mutex
	partial []byte
	lines   []string
	waiters []*lineWaiter
}

type lineWaiter struct {
	words []string
	got   chan string
}

// Write splits p into lines, keeps them and wakes the waiters they match.
func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := string(l.partial[:i])
		l.partial = l.partial[i+1:]
		l.lines = append(l.lines, line)
		kept := l.waiters[:0]
		for _, w := range l.waiters {
			if hasAll(line, w.words) {
				w.got <- line
				continue
			}
			kept = append(kept, w)
		}
		l.waiters = kept
	}
	return len(p), nil
}

// find returns the first line so far that holds every word.
func (l *logLines) find(words ...string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if hasAll(line, words) {
			return line, true
		}
	}
	return "", false
}

// next returns a channel that receives the first line written from now
// on that holds every word.
func (l *logLines) next(words ...string) <-chan string {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := &lineWaiter{words: words, got: make(chan string, 1)}
	l.waiters = append(l.waiters, w)
	return w.got
}

// wait waits for a line written from now on that holds every word.
func (l *logLines) wait(t *testing.T, ctx context.Context, words ...string) string {
	t.Helper()
	select {
	case line := <-l.next(words...):
		return line
	case <-ctx.Done():
		t.Fatalf("no log line with %q", words)
		return ""
	}
}

func hasAll(line string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(line, w) {
			return false
		}
	}
	return true
}
