package ledger

import "fmt"

// fgEntry is a foreground request not yet acknowledged.
type fgEntry struct {
	tool    string
	attempt string        // the attempt its begin named, once journaled
	result  []byte        // the tool's result as JSON; nil while running or when interrupted
	done    chan struct{} // closed when the request ended in this process or before it
}

// FgStatus is what the ledger knows of a foreground request.
type FgStatus struct {
	Running bool   // submitted by this process and not yet ended
	Result  []byte // the journaled result; nil when interrupted
	Attempt string // the attempt it began, if any
}

// FgStart registers a foreground request about to be journaled.
func (l *Ledger) FgStart(id, tool string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fg[id] = &fgEntry{tool: tool, done: make(chan struct{})}
}

// FgAbort forgets a foreground request whose submit record could not be
// journaled.
func (l *Ledger) FgAbort(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.fg, id)
}

// FgEnd ends a foreground request: result is its journaled result, or nil
// when the result could not be journaled (it then reads as interrupted).
func (l *Ledger) FgEnd(id string, result []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.fg[id]; e != nil {
		e.result = result
		close(e.done)
	}
}

// FgLookup returns a foreground request's status, or an error when no
// request id awaits acknowledgement.
func (l *Ledger) FgLookup(id string) (FgStatus, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.fg[id]
	if e == nil {
		return FgStatus{}, fmt.Errorf("no foreground request %q awaits acknowledgement", id)
	}
	select {
	case <-e.done:
		return FgStatus{Result: e.result, Attempt: e.attempt}, nil
	default:
		return FgStatus{Running: true, Attempt: e.attempt}, nil
	}
}

// FgAcked forgets an acknowledged foreground request (its fg-ack record is
// journaled).
func (l *Ledger) FgAcked(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.fg, id)
}
